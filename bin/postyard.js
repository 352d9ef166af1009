#!/usr/bin/env node
// The `postyard` command: runs the compiled JavaScript in dist/ (`npm run build`, which
// `npm install` runs through `prepare`; the published package ships dist/). Tests, benches and
// `npm run dev` run the TypeScript sources instead, through bin/postyard-src.js.
import module from 'node:module';

// Node 22.1+ keeps the compiled bytecode of every module between runs (a faster start); a no-op
// on Node 20, and a cache that cannot be written only costs that speed-up.
module.enableCompileCache?.();

try {
  await import('../dist/cli/main.js');
} catch (err) {
  if (err?.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('dist/cli/main.js')) {
    process.stderr.write(
      'postyard: dist/ is missing: run `npm run build` in the checkout (or `npm run dev -- <command>` to run the TypeScript sources)\n',
    );
    process.exit(1);
  }
  throw err;
}
