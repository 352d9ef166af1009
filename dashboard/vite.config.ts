import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/**
 * The dashboard's build: plain Vite with esbuild's automatic JSX runtime (no React plugin, so no
 * fast refresh in dev; nothing else is needed). Output: dashboard/dist, served by the API process.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/',
  publicDir: false,
  logLevel: 'warn',
  esbuild: { jsx: 'automatic' },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: false,
    // One small app: a single chunk loads fastest and keeps the CSP simple.
    modulePreload: false,
    reportCompressedSize: false,
  },
  server: {
    // `npx vite dashboard` during development: the API (npm start) answers /dashboard/api.
    proxy: { '/dashboard/api': 'http://127.0.0.1:3000' },
  },
});
