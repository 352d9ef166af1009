import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  // Tests and docs/examples import the client by its package name; run them against its sources.
  resolve: {
    alias: [
      {
        find: /^@postyard\/client$/,
        replacement: fileURLToPath(new URL('./packages/client/src/index.ts', import.meta.url)),
      },
    ],
  },
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'dashboard/src/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Files run in parallel on separate databases; 2 cores here.
    maxWorkers: 4,
  },
});
