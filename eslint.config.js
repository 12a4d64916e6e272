// The lint gate (`npm run lint`, run by .ci/run): typescript-eslint's type-aware rules over every
// TypeScript file the build compiles, and the few limits a newcomer's reading needs.
import js from '@eslint/js';
import globals from 'globals';
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
      // `const { dropped: _, ...rest } = obj` is how an object is copied without a key.
      '@typescript-eslint/no-unused-vars': ['error', { ignoreRestSiblings: true }],
      complexity: ['error', 25],
      'max-depth': ['error', 5],
    },
  },
  // The bench self-checks run under node:test, whose runner owns the promise of every test and
  // suite (it reports failures itself and never rejects it).
  {
    files: ['bench/**/*.test.ts'],
    rules: {
      '@typescript-eslint/no-floating-promises': ['error', { allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['describe', 'it', 'test'] }] }],
    },
  },
  { files: ['**/*.js', '**/*.mjs'], ...tseslint.configs.disableTypeChecked },
  // The JavaScript files (configs, build script, test fixtures) run in Node.
  { files: ['**/*.js', '**/*.mjs'], languageOptions: { globals: globals.node } },
);
