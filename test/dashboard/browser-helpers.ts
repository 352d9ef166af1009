/**
 * Real-browser harness for the dashboard: Debian's Chromium driven by playwright-core against the
 * real app listening on 127.0.0.1, screenshots under test-artifacts/dashboard/.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { nowIso } from '../../src/lib/clock.ts';
import { newId } from '../../src/lib/ids.ts';
import { insertEvents } from '../../src/modules/events/events.repo.ts';
import type { EventType, NewEvent } from '../../src/modules/events/events.types.ts';
import type { TestContext } from '../helpers/context.ts';
import { REPO_ROOT } from '../helpers/server-process.ts';

export const CHROMIUM = '/usr/bin/chromium';
export const HAVE_CHROMIUM = existsSync(CHROMIUM);
export const ARTIFACTS = join(REPO_ROOT, 'test-artifacts', 'dashboard');

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Builds the dashboard when its files are missing (a fresh clone builds it on npm install). */
export function ensureDashboardBuilt() {
  if (existsSync(join(REPO_ROOT, 'dashboard', 'dist', 'index.html'))) return;
  execFileSync('npm', ['run', 'build:dashboard'], { cwd: REPO_ROOT, stdio: 'inherit' });
}

export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
}

export async function listen(ctx: TestContext): Promise<string> {
  await ctx.app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
}

export async function screenshot(page: Page, name: string) {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/** Problems the page reported: console errors (CSP violations among them) and uncaught exceptions. */
export function watchProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('console', (m) => {
    // A failed resource load is logged by Chromium as an error too; 401/404 answers the app expects are fine.
    if (m.type() === 'error' && !/status of (401|404|422)/.test(m.text())) problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  return problems;
}

/**
 * A week of traffic for the overview charts and the activity page: events of each kind spread
 * over the last 7 days, and one message with a delivery attempt and its SMTP transcript.
 */
export async function seedTraffic(ctx: TestContext, tenantId: string): Promise<{ messageId: string }> {
  const db = ctx.c.database.db;
  const transmissionId = newId();
  const messageId = newId();
  const now = nowIso();
  await db
    .insertInto('transmissions')
    .values({
      tenant_id: tenantId,
      id: transmissionId,
      source: 'api',
      mail_type: 'transactional',
      tags: '["welcome"]',
      metadata: '{}',
      content: JSON.stringify({
        from: 'shop@example.com',
        subject: 'Welcome',
        text: 'Hi',
        html: null,
        reply_to: null,
        headers: {},
        attachments: [],
        template_id: null,
      }),
      raw_message: null,
      options: '{}',
      total_accepted: 1,
      total_rejected: 0,
      start_time: null,
      created_at: now,
    })
    .execute();
  await db
    .insertInto('messages')
    .values({
      tenant_id: tenantId,
      id: messageId,
      transmission_id: transmissionId,
      recipient: 'ann@example.net',
      recipient_name: 'Ann',
      recipient_domain: 'example.net',
      substitution_data: null,
      metadata: '{"crm_id":"42"}',
      state: 'delivered',
      attempt_count: 2,
      next_attempt_at: now,
      locked_until: null,
      locked_by: null,
      last_response: '250 2.0.0 Ok: queued as 4F2A1',
      created_at: now,
      updated_at: now,
    })
    .execute();
  const transcript = [
    'S: 220 mx.example.net ESMTP',
    'C: EHLO postyard.example.com',
    'S: 250-mx.example.net',
    'S: 250 STARTTLS',
    'C: STARTTLS',
    'S: 220 2.0.0 Ready to start TLS',
    'C: MAIL FROM:<bounces+1@postyard.example.com>',
    'S: 250 2.1.0 Ok',
    'C: RCPT TO:<ann@example.net>',
    'S: 250 2.1.5 Ok',
    'C: DATA',
    'S: 354 End data with <CR><LF>.<CR><LF>',
    'S: 250 2.0.0 Ok: queued as 4F2A1',
  ].join('\n');
  const attempt = (n: number, outcome: string, code: number, enhanced: string, response: string) => ({
    tenant_id: tenantId,
    id: newId(),
    message_id: messageId,
    attempt: n,
    started_at: now,
    finished_at: now,
    mx_host: 'mx.example.net',
    address: '192.0.2.25',
    tls: n === 2 ? 1 : 0,
    outcome,
    smtp_code: code,
    enhanced_code: enhanced,
    response,
    transcript: n === 2 ? transcript : 'S: 421 4.7.0 Try again later',
  });
  await db
    .insertInto('delivery_attempts')
    .values([
      attempt(1, 'deferred', 421, '4.7.0', 'Try again later'),
      attempt(2, 'delivered', 250, '2.0.0', 'Ok: queued as 4F2A1'),
    ])
    .execute();

  const kinds: [EventType, number][] = [
    ['message.accepted', 40],
    ['message.delivered', 34],
    ['message.deferred', 5],
    ['message.bounced', 3],
    ['message.complained', 1],
  ];
  const events: NewEvent[] = [];
  const days: number[] = [];
  for (let day = 0; day < 7; day++) {
    const scale = 0.5 + ((day * 37) % 10) / 10;
    for (const [type, base] of kinds) {
      for (let i = 0; i < Math.round(base * scale); i++) {
        events.push({
          tenantId,
          type,
          transmissionId,
          messageId: day === 0 && i === 0 ? messageId : newId(),
          recipient: day === 0 && i === 0 ? 'ann@example.net' : `user${day}-${i}@example.org`,
          mailType: 'transactional',
          tags: ['welcome'],
          metadata: {},
          data: type === 'message.delivered' ? { mx_host: 'mx.example.org', smtp_response: '250 2.0.0 Ok' } : {},
        });
        days.push(day);
      }
    }
  }
  const rows = await db.transaction().execute((trx) => insertEvents(trx, events));
  // Spread them over the week (ids stay "now", which the stats window allows).
  for (let day = 1; day < 7; day++) {
    const ids = rows.filter((_, i) => days[i] === day).map((r) => r.id);
    const at = new Date(Date.now() - day * 86_400_000).toISOString();
    for (let i = 0; i < ids.length; i += 500) {
      await db
        .updateTable('events')
        .set({ created_at: at })
        .where('id', 'in', ids.slice(i, i + 500))
        .execute();
    }
  }
  await db.deleteFrom('webhook_outbox').execute();
  return { messageId };
}
