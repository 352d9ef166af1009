import { isIP } from 'node:net';
import { guardedLookup, isForbiddenAddress } from '../../lib/address-guard.ts';

/**
 * SSRF guard for webhook URLs. A customer-supplied URL must not let Postyard reach its own
 * network: the address policy (src/lib/address-guard.ts) runs at create/PATCH time on what the
 * name resolves to, and again at connect time on the address actually connected to
 * (guardedLookup + the connector in sender.ts), so a DNS answer that changes between the two
 * (rebinding) does not get through.
 */

export interface UrlCheck {
  ok: boolean;
  message?: string;
}

const MAX_URL_LENGTH = 2048;

/** Syntax rules for every webhook URL, whatever the address policy. */
export function checkUrlSyntax(raw: string): UrlCheck & { url?: URL } {
  if (raw.length > MAX_URL_LENGTH) return { ok: false, message: `url must be at most ${MAX_URL_LENGTH} characters` };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, message: 'url must be an absolute http:// or https:// URL' };
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    return { ok: false, message: 'url must use http:// or https://' };
  }
  if (url.username || url.password) return { ok: false, message: 'url must not contain credentials' };
  if (!url.hostname) return { ok: false, message: 'url must name a host' };
  return { ok: true, url };
}

/** Resolves the URL's host (literal or by DNS) and refuses forbidden targets. */
export async function checkTargetAddress(url: URL): Promise<UrlCheck> {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (isIP(host)) {
    return isForbiddenAddress(host)
      ? { ok: false, message: `url points to ${host}, a private, loopback, link-local or reserved address` }
      : { ok: true };
  }
  // One answer for a name that resolves to a forbidden address and one that does not resolve:
  // neither the address an internal name has nor whether it exists is told.
  return new Promise((resolve) => {
    guardedLookup(host, { all: true }, (err) => {
      if (!err) return resolve({ ok: true });
      resolve({
        ok: false,
        message: `url host ${host} is not allowed (a webhook target must resolve to public addresses only)`,
      });
    });
  });
}
