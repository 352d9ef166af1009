/**
 * People and machines (docs/tracking.md): request shapes written down from how each service is
 * documented or commonly seen to fetch, run through the rules.
 */
import { describe, expect, it } from 'vitest';
import { classify, type RequestShape, SCANNER_CLICK_WINDOW_MS } from '../../src/modules/tracking/machine.ts';

const IPHONE_SAFARI =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1';
const DESKTOP_CHROME =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36';
const HOUR = 3_600_000;

const shapes: [string, RequestShape, string | null][] = [
  // Apple Mail Privacy Protection: prefetch from Apple's 17.0.0.0/8 with a bare agent.
  [
    'Apple MPP prefetch',
    { kind: 'open', ip: '17.58.101.12', userAgent: 'Mozilla/5.0', sinceDeliveryMs: 40_000 },
    'apple-mpp-address',
  ],
  [
    'Apple MPP over IPv6',
    { kind: 'open', ip: '2620:149:a:0:1::12', userAgent: 'Mozilla/5.0', sinceDeliveryMs: 40_000 },
    'apple-mpp-address',
  ],
  [
    'MPP agent from a relay egress',
    { kind: 'open', ip: '104.28.40.1', userAgent: 'Mozilla/5.0', sinceDeliveryMs: HOUR },
    'apple-mpp-agent',
  ],
  // Gmail fetches images through its proxy (ggpht.com) on Google addresses.
  [
    'Gmail image proxy',
    {
      kind: 'open',
      ip: '66.249.84.86',
      userAgent: 'Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)',
      sinceDeliveryMs: HOUR,
    },
    'gmail-image-proxy',
  ],
  [
    'Yahoo proxy',
    {
      kind: 'open',
      ip: '98.136.1.1',
      userAgent: 'YahooMailProxy; https://help.yahoo.com/kb/yahoo-mail-proxy-SLN28749.html',
      sinceDeliveryMs: HOUR,
    },
    'yahoo-mail-proxy',
  ],
  // Security gateways that follow every link of incoming mail.
  [
    'Barracuda link check',
    {
      kind: 'click',
      ip: '64.235.144.10',
      userAgent: 'Mozilla/5.0 (compatible; Barracuda Sentinel)',
      sinceDeliveryMs: HOUR,
    },
    'security-scanner',
  ],
  [
    'Mimecast URL protect',
    { kind: 'click', ip: '205.139.110.1', userAgent: 'Mimecast-URL-Protect/1.0', sinceDeliveryMs: HOUR },
    'security-scanner',
  ],
  [
    'Office link preview',
    { kind: 'click', ip: '52.96.0.1', userAgent: 'Microsoft Office Existence Discovery', sinceDeliveryMs: HOUR },
    'microsoft-link-check',
  ],
  [
    'python script',
    { kind: 'click', ip: '203.0.113.9', userAgent: 'python-requests/2.31.0', sinceDeliveryMs: HOUR },
    'http-library',
  ],
  [
    'headless browser sandbox',
    { kind: 'click', ip: '203.0.113.9', userAgent: 'Mozilla/5.0 HeadlessChrome/126.0.0.0', sinceDeliveryMs: HOUR },
    'http-library',
  ],
  [
    'Slack unfurl',
    {
      kind: 'click',
      ip: '203.0.113.9',
      userAgent: 'Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)',
      sinceDeliveryMs: HOUR,
    },
    'bot-or-preview',
  ],
  ['no user agent', { kind: 'click', ip: '203.0.113.9', userAgent: '', sinceDeliveryMs: HOUR }, 'no-user-agent'],
  // A scanner with a browser's agent, betrayed by its speed: 3 s after delivery.
  [
    'click 3 s after delivery',
    { kind: 'click', ip: '40.107.1.1', userAgent: DESKTOP_CHROME, sinceDeliveryMs: 3000 },
    'click-within-seconds-of-delivery',
  ],
  // People.
  [
    'person on iPhone Safari (not via MPP)',
    { kind: 'click', ip: '198.51.100.20', userAgent: IPHONE_SAFARI, sinceDeliveryMs: HOUR },
    null,
  ],
  [
    'person clicking after the scanner window',
    { kind: 'click', ip: '198.51.100.21', userAgent: DESKTOP_CHROME, sinceDeliveryMs: SCANNER_CLICK_WINDOW_MS + 1 },
    null,
  ],
  [
    'person opening fast (the timing rule is for clicks only)',
    { kind: 'open', ip: '198.51.100.22', userAgent: DESKTOP_CHROME, sinceDeliveryMs: 1000 },
    null,
  ],
  [
    'person, message not delivered yet (relay still retrying)',
    { kind: 'click', ip: '198.51.100.23', userAgent: DESKTOP_CHROME, sinceDeliveryMs: null },
    null,
  ],
];

describe('machine rules', () => {
  it.each(shapes)('%s', (_name, shape, rule) => {
    expect(classify(shape)).toEqual({ machine: rule !== null, rule });
  });
});
