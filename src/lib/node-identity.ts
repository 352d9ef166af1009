import { randomBytes } from 'node:crypto';
import { linkSync, readFileSync, unlinkSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { ensurePrivateDir, writePrivateFile } from './private-files.ts';

/** A node id: what POSTYARD_NODE_ID accepts and what <data dir>/node-id holds. */
export const NODE_ID_FORMAT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/**
 * Who this process is. `nodeId` survives restarts (configured, or kept in the data dir), so a
 * restarted node knows which claims were its own; `holder` is this run of it and is what claims
 * record (locked_by, lease holder), `<nodeId>:<pid>:<random>`.
 */
export interface NodeSelf {
  nodeId: string;
  holder: string;
  host: string;
  pid: number;
}

export function nodeSelf(nodeId: string): NodeSelf {
  return {
    nodeId,
    holder: `${nodeId}:${process.pid}:${randomBytes(4).toString('hex')}`,
    host: hostname(),
    pid: process.pid,
  };
}

/**
 * The configured node id, else the one in `<dataDir>/node-id`, created (mode 0600) on first use.
 * Created by link(2) from a private temp file, so two processes starting at once agree on one id.
 */
export function resolveNodeId(configured: string | null, dataDir: string): string {
  if (configured) return configured;
  const file = join(dataDir, 'node-id');
  const read = (): string | null => {
    try {
      const id = readFileSync(file, 'utf8').trim();
      if (!NODE_ID_FORMAT.test(id)) throw new Error(`${file} does not hold a valid node id: "${id.slice(0, 80)}"`);
      return id;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  };
  const existing = read();
  if (existing) return existing;
  ensurePrivateDir(dataDir);
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
  writePrivateFile(tmp, `node-${randomBytes(8).toString('hex')}\n`);
  try {
    linkSync(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    unlinkSync(tmp);
  }
  const id = read();
  if (!id) throw new Error(`${file} could not be created`);
  return id;
}
