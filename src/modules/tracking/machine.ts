/**
 * Is an open or click a person, or a machine acting for one? (docs/tracking.md "People and
 * machines"). Each rule is data with the reason it names; the first that matches wins. Rules are
 * heuristics from how these services are known to fetch, not a guarantee: a machine event is
 * still recorded (`machine: true`), so nothing is lost when a rule is wrong.
 */
import { BlockList, isIP } from 'node:net';

export interface RequestShape {
  kind: 'open' | 'click';
  ip: string;
  userAgent: string;
  /** ms between the message's delivery and this request; null when not delivered (yet). */
  sinceDeliveryMs: number | null;
}

export interface MachineVerdict {
  machine: boolean;
  /** Which rule matched (for logs and tests); null for a person. */
  rule: string | null;
}

/** Clicks this soon after delivery are link scanners: nobody reads and clicks that fast. */
export const SCANNER_CLICK_WINDOW_MS = 10_000;

/**
 * Apple Mail Privacy Protection fetches remote content through Apple's relay, from Apple's
 * 17.0.0.0/8; its fetcher sends the bare user agent `Mozilla/5.0`.
 */
const APPLE = new BlockList();
APPLE.addSubnet('17.0.0.0', 8, 'ipv4');
APPLE.addSubnet('2620:149::', 32, 'ipv6');
APPLE.addSubnet('2a01:b740::', 32, 'ipv6');

/** User agents of image proxies and scanners (case-insensitive substrings). */
const PROXY_AGENTS: readonly [RegExp, string][] = [
  [/GoogleImageProxy/i, 'gmail-image-proxy'],
  [/YahooMailProxy/i, 'yahoo-mail-proxy'],
  [/Microsoft Office Existence Discovery|ms-office; MSOffice|Outlook-iOS-Android.*Safelinks/i, 'microsoft-link-check'],
  [
    /Barracuda|Mimecast|Proofpoint|Symantec|Forcepoint|Trend ?Micro|Sophos|FireEye|Cisco|IronPort|ZScaler|SafeLinks|MessageLabs|Cloudmark/i,
    'security-scanner',
  ],
  [
    /HeadlessChrome|PhantomJS|python-requests|python-urllib|Go-http-client|curl\/|Wget|libwww|okhttp|Java\//i,
    'http-library',
  ],
  [/bot\b|bot\/|crawler|spider|preview|slurp|facebookexternalhit|Slackbot|WhatsApp|TelegramBot/i, 'bot-or-preview'],
];

export function classify(r: RequestShape): MachineVerdict {
  const ua = r.userAgent.trim();
  const family = isIP(r.ip);
  if (family && APPLE.check(r.ip, family === 4 ? 'ipv4' : 'ipv6')) return { machine: true, rule: 'apple-mpp-address' };
  if (r.kind === 'open' && ua === 'Mozilla/5.0') return { machine: true, rule: 'apple-mpp-agent' };
  for (const [re, rule] of PROXY_AGENTS) if (re.test(ua)) return { machine: true, rule };
  if (ua === '') return { machine: true, rule: 'no-user-agent' };
  if (r.kind === 'click' && r.sinceDeliveryMs !== null && r.sinceDeliveryMs < SCANNER_CLICK_WINDOW_MS) {
    return { machine: true, rule: 'click-within-seconds-of-delivery' };
  }
  return { machine: false, rule: null };
}
