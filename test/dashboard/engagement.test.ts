/**
 * Opens and clicks on the dashboard (issue 16 item 5), in a real Chromium against the real app,
 * on either backend: events recorded through the public tracking routes (people and machines by
 * the documented rules) show on the overview's cards and chart and on the message page, people
 * and machines counted apart. Skips (saying why) when /usr/bin/chromium is absent.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deriveTokenKey, signToken } from '../../src/modules/tracking/token.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import {
  CHROMIUM,
  ensureDashboardBuilt,
  HAVE_CHROMIUM,
  launchBrowser,
  listen,
  screenshot,
  watchProblems,
} from './browser-helpers.ts';

const EMAIL = 'owner@engage.test';
const PASSWORD = 'a long dashboard password';
const PERSON =
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15';
const GMAIL_PROXY = 'Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)';
const SCANNER = 'python-requests/2.31.0';

if (!HAVE_CHROMIUM)
  console.warn(`SKIPPED dashboard engagement tests: ${CHROMIUM} not found (apt-get install chromium).`);

describe.skipIf(!HAVE_CHROMIUM)('opens and clicks on the dashboard', () => {
  let ctx: TestContext;

  /** The Host a browser sends for a link on the public URL: tokens are honoured on that host (docs/tracking.md). */
  const publicHost = () => new URL(ctx.c.config.publicUrl).host;
  let t: TestTenant;
  let base: string;
  let browser: Browser;
  let page: Page;
  let problems: string[];
  let messageId: string;
  let otherMessageId: string;

  async function accept(tenant: TestTenant, email: string): Promise<string> {
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: tenant.apiKey,
      body: {
        recipients: [{ email }],
        content: { subject: 'Sale', html: '<a href="https://shop.engage.test/">Sale</a>' },
        options: { mail_type: 'marketing' },
      },
    });
    expect(res.statusCode, res.body).toBe(202);
    const row = await ctx.c.database.db
      .selectFrom('messages')
      .select('id')
      .where('transmission_id', '=', res.json().transmission_id as string)
      .executeTakeFirstOrThrow();
    return row.id;
  }

  async function hit(path: string, ua: string, ip: string, status: number) {
    const r = await ctx.app.inject({
      method: 'GET',
      url: path,
      headers: { host: publicHost(), 'user-agent': ua },
      remoteAddress: ip,
    });
    expect(r.statusCode, `${path} ${ua}`).toBe(status);
  }

  beforeAll(async () => {
    ensureDashboardBuilt();
    ctx = await createTestContext();
    t = await createTenant(ctx, 'Engage <news@engage.test>');
    await ctx.c.dashboard.createUser(t.tenantId, { email: EMAIL, password: PASSWORD });
    const key = deriveTokenKey(ctx.c.masterKey);
    messageId = await accept(t, 'reader@dest.test');
    const open = `/o/${signToken(key, { kind: 'open', messageId })}`;
    const click = `/c/${signToken(key, { kind: 'click', messageId, link: 0, url: 'https://shop.engage.test/' })}`;
    // People: 2 opens, 1 click. Machines: 1 open by Gmail's proxy, 2 clicks by a scanner.
    await hit(open, PERSON, '198.51.100.1', 200);
    await hit(open, PERSON, '198.51.100.1', 200);
    await hit(open, GMAIL_PROXY, '66.249.84.1', 200);
    await hit(click, PERSON, '198.51.100.1', 302);
    await hit(click, SCANNER, '203.0.113.9', 302);
    await hit(click, SCANNER, '203.0.113.9', 302);
    // Another tenant's opens count for that tenant only.
    const other = await createTenant(ctx, 'Other <news@other-engage.test>');
    otherMessageId = await accept(other, 'x@dest.test');
    await hit(`/o/${signToken(key, { kind: 'open', messageId: otherMessageId })}`, PERSON, '198.51.100.2', 200);

    base = await listen(ctx);
    browser = await launchBrowser();
    const context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
    context.setDefaultTimeout(15_000);
    page = await context.newPage();
    problems = watchProblems(page);
    await page.goto(`${base}/login`);
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await ctx?.close();
  });

  const card = async (label: string) => {
    const c = page.locator('.stat-card', { has: page.locator('dt', { hasText: new RegExp(`^${label}$`) }) });
    return { value: await c.locator('dd').first().textContent(), hint: await c.locator('dd.hint').textContent() };
  };

  it('the overview shows opens and clicks by people, and machines apart, on cards and a chart', async () => {
    await page.goto(`${base}/?range=24h`);
    await page.locator('.stat-card', { hasText: 'Opens' }).waitFor();
    expect(await card('Opens')).toEqual({ value: '2', hint: 'people; 1 more by machines' });
    expect(await card('Clicks')).toEqual({ value: '1', hint: 'people; 2 more by machines' });
    // The chart's table (for screen readers and keyboards): summed over the hours, whichever
    // hour the events fell in.
    const fig = page.locator('figure.chart', { hasText: 'Opens and clicks, people and machines' });
    await fig.locator('summary').click();
    const heads = await fig.locator('thead th').allTextContents();
    expect(heads.slice(1)).toEqual(['Opens (people)', 'Opens (machines)', 'Clicks (people)', 'Clicks (machines)']);
    const sums = [0, 0, 0, 0];
    for (const row of await fig.locator('tbody tr').all()) {
      (await row.locator('td').allTextContents()).forEach((v, i) => {
        sums[i] = (sums[i] ?? 0) + Number(v);
      });
    }
    expect(sums).toEqual([2, 1, 1, 2]);
    await screenshot(page, 'engagement-overview');
    expect(problems).toEqual([]);
  });

  it("the message page counts the message's opens and clicks, people and machines apart", async () => {
    await page.goto(`${base}/messages/${messageId}`);
    await page.getByRole('heading', { name: 'Opens and clicks' }).waitFor();
    expect(await page.getByTestId('opens').textContent()).toBe('2 by people, 1 by machines');
    expect(await page.getByTestId('clicks').textContent()).toBe('1 by people, 2 by machines');
    await screenshot(page, 'engagement-message');
    // Another tenant's message is not found, its counts never shown.
    await page.goto(`${base}/messages/${otherMessageId}`);
    await page.getByRole('heading', { name: 'Message not found' }).waitFor();
    expect(await page.getByTestId('opens').count()).toBe(0);
    expect(problems.filter((p) => !p.includes('404'))).toEqual([]);
  });
});
