// Entry of a template sandbox thread (see template-sandbox.ts). Plain JavaScript on purpose: a
// worker thread does not inherit the parent's tsx loader, so it registers tsx itself before
// loading the TypeScript module, as render-thread-entry.js does.
import { register } from 'tsx/esm/api';

register();
await import('./template-sandbox-thread.ts');
