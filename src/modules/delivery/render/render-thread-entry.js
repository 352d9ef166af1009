// Entry of a render thread (see render-pool.ts). Plain JavaScript on purpose: a worker thread
// does not inherit the parent's tsx loader, so it registers tsx itself before loading the
// TypeScript module — the same way bin/postyard.js starts the process.
import { register } from 'tsx/esm/api';

register();
await import('./render-thread.ts');
