#!/usr/bin/env node
// Runs the TypeScript sources directly through tsx's loader: no build step between
// `npm install` and `npm start` (see docs/ARCHITECTURE.md, "Running TypeScript").
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');
