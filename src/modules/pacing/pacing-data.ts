import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

/**
 * Shaping and automation as data (docs/pacing.md): the shipped defaults are config/pacing.yaml,
 * operators point POSTYARD_PACING_FILE at their own copy. Read once at start with the `yaml`
 * package (kept, already in the tree through Fastify's swagger); a file that breaks the rules
 * below stops the start with a message naming the entry, never half-applied.
 */
export interface SiteLimits {
  maxConnections: number;
  maxMessagesPerConnection: number;
  messagesPerMinute: number;
  messagesPerHour: number;
}

export interface SiteProfile {
  name: string;
  /** MX host suffixes (lower case, leading dot); empty for `default`. */
  mx: string[];
  limits: SiteLimits;
}

export type RuleAction = 'suspend' | 'slow';

export interface AutomationRule {
  id: string;
  /** null = every site. */
  sites: string[] | null;
  match: RegExp;
  action: RuleAction;
  /** Limits are multiplied by this while `slow` lasts (0 < factor < 1); 1 for suspend. */
  factor: number;
  durationMs: number;
}

export interface PacingData {
  /** File order: the first site whose suffix matches wins. Always holds `default`, last. */
  sites: SiteProfile[];
  rules: AutomationRule[];
}

export const LIMIT_FIELDS = [
  ['max_connections', 'maxConnections'],
  ['messages_per_connection', 'maxMessagesPerConnection'],
  ['messages_per_minute', 'messagesPerMinute'],
  ['messages_per_hour', 'messagesPerHour'],
] as const;

/** Upper bound of any limit, in the file and the API (a per-minute figure no host reaches). */
export const MAX_LIMIT = 10_000_000;
export const SITE_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/** config/pacing.yaml: from src/modules/pacing/ and from dist/modules/pacing/ alike. */
export const SHIPPED_PACING_FILE = new URL('../../../config/pacing.yaml', import.meta.url);

export class PacingDataError extends Error {}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function limitOf(where: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > MAX_LIMIT) {
    throw new PacingDataError(`${where}: a whole number from 1 to ${MAX_LIMIT} is required`);
  }
  return v;
}

/** Parses and checks a pacing file's text; `source` names it in errors. */
export function parsePacingData(text: string, source: string): PacingData {
  let doc: unknown;
  try {
    doc = parse(text, { uniqueKeys: true });
  } catch (err) {
    throw new PacingDataError(`${source}: not valid YAML: ${(err as Error).message}`);
  }
  if (!isObject(doc) || !isObject(doc.sites)) throw new PacingDataError(`${source}: a "sites" mapping is required`);
  const sites: SiteProfile[] = [];
  let fallback: SiteProfile | null = null;
  for (const [name, raw] of Object.entries(doc.sites)) {
    const where = `${source}: sites.${name}`;
    if (!SITE_NAME.test(name)) throw new PacingDataError(`${where}: site names are lower-case letters, digits, . _ -`);
    if (!isObject(raw)) throw new PacingDataError(`${where}: a mapping is required`);
    const limits = {} as SiteLimits;
    for (const [file, key] of LIMIT_FIELDS) limits[key] = limitOf(`${where}.${file}`, raw[file]);
    const mxRaw = raw.mx ?? [];
    if (!Array.isArray(mxRaw) || mxRaw.some((m) => typeof m !== 'string' || !/^\.?[a-z0-9.-]+$/i.test(m))) {
      throw new PacingDataError(`${where}.mx: a list of host name suffixes is required`);
    }
    const mx = mxRaw.map((m: string) => (m.startsWith('.') ? m : `.${m}`).toLowerCase());
    const known = new Set(['mx', ...LIMIT_FIELDS.map(([f]) => f)]);
    for (const k of Object.keys(raw)) if (!known.has(k)) throw new PacingDataError(`${where}: unknown field "${k}"`);
    const profile = { name, mx, limits };
    if (name === 'default') {
      if (mx.length) throw new PacingDataError(`${where}.mx: "default" matches every other host, it takes no mx list`);
      fallback = profile;
    } else {
      if (!mx.length) throw new PacingDataError(`${where}.mx: at least one suffix is required`);
      sites.push(profile);
    }
  }
  if (!fallback) throw new PacingDataError(`${source}: sites.default is required`);
  sites.push(fallback);
  const names = new Set(sites.map((s) => s.name));
  const rules: AutomationRule[] = [];
  const rawRules = doc.rules ?? [];
  if (!Array.isArray(rawRules)) throw new PacingDataError(`${source}: "rules" must be a list`);
  for (const [i, r] of rawRules.entries()) {
    const where = `${source}: rules[${i}]`;
    if (!isObject(r) || typeof r.id !== 'string' || !r.id) throw new PacingDataError(`${where}.id is required`);
    if (typeof r.match !== 'string' || !r.match) throw new PacingDataError(`${where}.match is required`);
    let match: RegExp;
    try {
      match = new RegExp(r.match, 'i');
    } catch (err) {
      throw new PacingDataError(`${where}.match: ${(err as Error).message}`);
    }
    if (r.action !== 'suspend' && r.action !== 'slow') throw new PacingDataError(`${where}.action: suspend or slow`);
    const factor = r.action === 'slow' ? r.factor : 1;
    if (typeof factor !== 'number' || !(factor > 0 && factor <= 1)) {
      throw new PacingDataError(`${where}.factor: a number above 0 and at most 1 is required for slow`);
    }
    const seconds = r.duration_seconds;
    if (typeof seconds !== 'number' || !Number.isInteger(seconds) || seconds < 1 || seconds > 7 * 86_400) {
      throw new PacingDataError(`${where}.duration_seconds: 1 to 604800`);
    }
    let ruleSites: string[] | null = null;
    if (r.sites !== undefined) {
      if (!Array.isArray(r.sites) || r.sites.some((s) => typeof s !== 'string' || !names.has(s))) {
        throw new PacingDataError(`${where}.sites: names of sites in this file`);
      }
      ruleSites = r.sites as string[];
    }
    rules.push({ id: r.id, sites: ruleSites, match, action: r.action, factor, durationMs: seconds * 1000 });
  }
  return { sites, rules };
}

/** Reads a pacing file (the shipped one when `path` is null). */
export function loadPacingData(path: string | null): PacingData {
  const file = path ?? SHIPPED_PACING_FILE;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new PacingDataError(`cannot read the pacing file ${String(file)}: ${(err as Error).message}`);
  }
  return parsePacingData(text, path ?? 'config/pacing.yaml');
}
