// The lint gate (`npm run lint`, run by .ci/run): typescript-eslint's type-aware rules over every
// TypeScript file the build compiles, and the few limits a newcomer's reading needs.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'bench/results/', 'models/', '.scratch/', 'native/', 'helm/', 'deploy/', 'crds/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      complexity: ['error', 25],
      'max-depth': ['error', 5],
    },
  },
  { files: ['**/*.js', '**/*.mjs'], ...tseslint.configs.disableTypeChecked },
);
