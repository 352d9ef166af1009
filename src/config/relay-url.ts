/**
 * POSTYARD_RELAY_URL -> RelayConfig (docs/operations.md "Outbound TLS": a relay always gets TLS with a verified
 * certificate unless the operator opts out explicitly, and AUTH never goes in clear text).
 *
 * - `smtp://user:pass@host:port` (default port 587): STARTTLS required, certificate verified
 *   against `host`; a relay that does not offer STARTTLS, or whose handshake or certificate fails,
 *   gets nothing (the messages are deferred), never a plain-text retry.
 * - `smtps://...` (default port 465): implicit TLS, certificate verified.
 * - `?verify=false` (unsafe): TLS still required, the certificate is not checked.
 * - `?tls=none` (unsafe): plain text, no STARTTLS; refused together with credentials or smtps.
 * Unknown query options are refused, so a typo (`?tls=off`) cannot silently weaken anything.
 * Pure parsing: config.ts calls it at start-up so a bad URL stops the process with one line.
 */

export interface RelayConfig {
  host: string;
  port: number;
  /** Implicit TLS from the first byte (smtps://). */
  secure: boolean;
  /** 'required' (default): TLS or no delivery. 'none' (`?tls=none`): plain text only. */
  tls: 'required' | 'none';
  /** Refuse a certificate that does not verify (default); `?verify=false` turns that off. */
  verify: boolean;
  auth?: { user: string; pass: string };
}

const OPTIONS: Record<string, readonly string[]> = {
  tls: ['required', 'none'],
  verify: ['true', 'false'],
};

/** Parses the relay URL; throws an Error whose message says what is wrong (no secrets in it). */
export function relayFromUrl(value: string): RelayConfig {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error('relay URL is not a valid URL (expected smtp://user:pass@host:port)');
  }
  if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:') {
    throw new Error(`relay URL must start with smtp:// or smtps://, not ${url.protocol}//`);
  }
  if (!url.hostname) throw new Error('relay URL has no host');
  if (url.pathname !== '' && url.pathname !== '/') throw new Error('relay URL must not have a path');
  for (const [key, v] of url.searchParams) {
    const allowed = OPTIONS[key];
    if (!allowed) throw new Error(`relay URL option "${key}" is unknown (known: tls=none, verify=false)`);
    if (!allowed.includes(v)) throw new Error(`relay URL option ${key} must be one of ${allowed.join(', ')}`);
  }
  const secure = url.protocol === 'smtps:';
  const tlsMode = url.searchParams.get('tls') === 'none' ? 'none' : 'required';
  if (tlsMode === 'none' && secure) throw new Error('relay URL: smtps:// and tls=none contradict each other');
  if (tlsMode === 'none' && url.username) {
    throw new Error('relay URL: tls=none with credentials would send them in clear text; use TLS');
  }
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const config: RelayConfig = {
    host,
    port: url.port ? Number(url.port) : secure ? 465 : 587,
    secure,
    tls: tlsMode,
    verify: url.searchParams.get('verify') !== 'false',
  };
  if (url.username) config.auth = { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) };
  return config;
}
