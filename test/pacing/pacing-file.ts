import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Writes a pacing data file (docs/pacing.md) into a fresh temp dir; the path, for POSTYARD_PACING_FILE. */
export function writePacingFile(yaml: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'postyard-pacing-')), 'pacing.yaml');
  writeFileSync(file, yaml);
  return file;
}
