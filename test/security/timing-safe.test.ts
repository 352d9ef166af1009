/**
 * Timing-safe comparisons (docs/security.md, "Comparisons of secrets"). No timing is measured
 * (that would be flaky and prove little); instead:
 * - a source scan: no `===`/`!==` on anything named like a secret (token, secret, hash, password,
 *   csrf, signature, ...) anywhere in src/ or the client package, so secret material is compared
 *   only through safeEqual (crypto.timingSafeEqual) or looked up by its SHA-256;
 * - safeEqual and verifyPassword really are built on timingSafeEqual and behave correctly;
 * - the dummy scrypt hashes used for unknown SMTP users and unknown dashboard emails are
 *   well-formed and have the same cost parameters as real hashes, so "no such user" takes the
 *   same work as "wrong password" (no user enumeration by timing).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { hashPassword, safeEqual, verifyPassword } from '../../src/lib/crypto.ts';
import { REPO_ROOT } from '../helpers/server-process.ts';

const SECRETISH = /(token|secret|hash|password|passwd|csrf|signature|\bsig\b|digest|hmac|api_?key|cookie)/i;
const LITERAL = /^(null|undefined|true|false|-?\d[\d_.]*|'[^']*'|"[^"]*"|`[^`]*`)$/;
const COMPARISON = /(typeof\s+)?([\w$.?[\]()'"]+)\s*(===|!==|==|!=)\s*([\w$.?[\]()'"`]+)/g;

/** `file:line: text` for every equality comparison of a secret-named value with a non-literal. */
function secretComparisons(source: string, file = 'snippet'): string[] {
  const hits: string[] = [];
  source.split('\n').forEach((line, i) => {
    const code = line.replace(/\/\/.*$/, '');
    if (/^\s*(\*|\/\*)/.test(code)) return;
    for (const m of code.matchAll(COMPARISON)) {
      const [, typeofKw, rawLeft = '', , rawRight = ''] = m;
      // Operands may carry the parentheses of an enclosing `if (...)` or call: drop unbalanced ones.
      const left = rawLeft.replace(/^\(+/, '');
      const right = rawRight.replace(/\)+$/, '');
      if (typeofKw) continue;
      if (!SECRETISH.test(left) && !SECRETISH.test(right)) continue;
      if (LITERAL.test(left) || LITERAL.test(right)) continue;
      if (/\.(length|size)$/.test(left) || /\.(length|size)$/.test(right)) continue;
      hits.push(`${file}:${i + 1}: ${line.trim()}`);
    }
  });
  return hits;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path));
    else if (/\.tsx?$/.test(name) && !/\.test\.tsx?$/.test(name)) out.push(path);
  }
  return out;
}

describe('source scan: secrets are never compared with === / !==', () => {
  it('finds such comparisons when they exist (the scanner itself works)', () => {
    const bad = [
      'if (row.key_hash === hash) return row;',
      'const ok = given !== session.csrfToken;',
      'return sig == expected;',
      'if (password === stored.password) {',
      'headerToken(req) === csrf',
    ].join('\n');
    expect(secretComparisons(bad)).toHaveLength(5);
    const fine = [
      'has_password: row.password_hash !== null,',
      "if (typeof token !== 'string') return null;",
      'if (!safeEqual(row.key_hash, hash)) return null;',
      'if (secret.length === 0) throw new Error();',
      "const x = mode === 'hash';",
      '// a comment: token === other',
    ].join('\n');
    expect(secretComparisons(fine)).toEqual([]);
  });

  it('src/ and packages/client/src hold none', () => {
    const files = [
      ...sourceFiles(join(REPO_ROOT, 'src')),
      ...sourceFiles(join(REPO_ROOT, 'packages', 'client', 'src')),
    ];
    expect(files.length).toBeGreaterThan(50);
    const hits = files.flatMap((f) => secretComparisons(readFileSync(f, 'utf8'), relative(REPO_ROOT, f)));
    expect(hits).toEqual([]);
  });

  it('the places that compare secret material use safeEqual or a hash lookup', () => {
    const read = (p: string) => readFileSync(join(REPO_ROOT, p), 'utf8');
    // API keys: looked up by SHA-256, then compared with safeEqual.
    expect(read('src/modules/api-keys/api-keys.service.ts')).toMatch(/safeEqual\(row\.key_hash, hash\)/);
    // Dashboard CSRF tokens and session ids (SHA-256 of the cookie), signed cursors.
    expect(read('src/http/dashboard-session.ts')).toMatch(/safeEqual\(given, e\)/);
    expect(read('src/modules/dashboard/accounts.service.ts')).toMatch(/safeEqual\(row\.id, id\)/);
    expect(read('src/lib/pagination.ts')).toMatch(/safeEqual\(sig, /);
  });
});

describe('safeEqual and verifyPassword', () => {
  const crypto = readFileSync(join(REPO_ROOT, 'src', 'lib', 'crypto.ts'), 'utf8');
  const body = (name: string) => {
    const start = crypto.indexOf(`function ${name}(`);
    expect(start, name).toBeGreaterThan(-1);
    return crypto.slice(start, crypto.indexOf('\n}\n', start));
  };

  it('are built on crypto.timingSafeEqual', () => {
    expect(body('safeEqual')).toContain('timingSafeEqual(');
    expect(body('verifyPassword')).toContain('timingSafeEqual(');
  });

  it('safeEqual answers correctly, including different lengths and multi-byte text', () => {
    expect(safeEqual('abc', 'abc')).toBe(true);
    expect(safeEqual('abc', 'abd')).toBe(false);
    expect(safeEqual('abc', 'abcd')).toBe(false);
    expect(safeEqual('', '')).toBe(true);
    expect(safeEqual('é', 'e\u0301')).toBe(false);
  });

  it('verifyPassword refuses malformed stored values instead of throwing', async () => {
    for (const stored of ['', 'scrypt', 'md5$1$2$3$4$5', 'scrypt$32768$8$1$$']) {
      await expect(verifyPassword('x', stored)).resolves.toBe(false);
    }
  });
});

describe('unknown users cost the same scrypt work as wrong passwords', () => {
  const dummies = [
    'src/modules/smtp-credentials/smtp-credentials.service.ts',
    'src/modules/dashboard/accounts.service.ts',
  ].map((p) => {
    const m = /const DUMMY_HASH = '([^']+)'/.exec(readFileSync(join(REPO_ROOT, p), 'utf8'));
    return [p, m?.[1] ?? ''] as const;
  });

  it.each(dummies)('%s: the dummy hash has the parameters of a real one and really runs scrypt', async (_p, dummy) => {
    expect(dummy).not.toBe('');
    const real = await hashPassword('some password');
    const [alg, n, r, p, salt, hash] = dummy.split('$');
    const [ralg, rn, rr, rp, rsalt, rhash] = real.split('$');
    expect([alg, n, r, p]).toEqual([ralg, rn, rr, rp]);
    expect(Buffer.from(salt ?? '', 'base64').length).toBe(Buffer.from(rsalt ?? '', 'base64').length);
    expect(Buffer.from(hash ?? '', 'base64').length).toBe(Buffer.from(rhash ?? '', 'base64').length);
    // Well-formed enough that verifyPassword computes the hash (then says no) rather than bailing out.
    await expect(verifyPassword('some password', dummy)).resolves.toBe(false);
  });
});
