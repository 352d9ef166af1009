#!/usr/bin/env node
// `postyard` from the TypeScript sources through tsx's loader, without the build step: what the
// tests, the benches and `npm run dev` run, so they always see the current src/ and never a
// dist/ built before the last edit. Not part of the published package (tsx is a devDependency).
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');
