// Five tiers, one runner: `npm test` builds, then runs them all, in band, because the integration
// and cluster tiers start real servers and processes that would fight over 2 cores in parallel.
// unit needs `npm ci` alone: no dist/, no tools. build holds the tests that need more than the
// sources — the built dist/ (the CLI, the native addon) or helm — without servers. See docs/testing.md.
const tsJest = ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json', diagnostics: { ignoreCodes: [151002] } }];
const common = {
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': tsJest },
  testEnvironment: 'node',
  // Benchmarks are not a test tier: their self-checks (bench/**/*.test.ts, node:test) run with `npm run bench:check`.
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/bench/', '<rootDir>/dist/'],
};
export default {
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    { ...common, displayName: 'build', testMatch: ['<rootDir>/test/build/**/*.test.ts'] },
    { ...common, displayName: 'integration', testMatch: ['<rootDir>/test/integration/**/*.test.ts'] },
    { ...common, displayName: 'cluster', testMatch: ['<rootDir>/test/cluster/**/*.test.ts'] },
    // The container image test/tools/build-image.sh builds from the Dockerfile, run as the chart runs it (root only).
    { ...common, displayName: 'image', testMatch: ['<rootDir>/test/image/**/*.test.ts'] },
  ],
};
