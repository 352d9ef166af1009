/**
 * The dashboard in a real browser (Debian's Chromium via playwright-core) against the real app on
 * 127.0.0.1, on either backend: sign in, make an API key and use it over HTTP, add a webhook at
 * /settings/webhooks and send it a test, add and remove a suppression; a screenshot of every
 * page goes to test-artifacts/dashboard/. Skips (saying why) when /usr/bin/chromium is absent.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { type Receiver, startReceiver, verify } from '../webhooks/helpers.ts';
import {
  CHROMIUM,
  ensureDashboardBuilt,
  HAVE_CHROMIUM,
  launchBrowser,
  listen,
  screenshot,
  seedTraffic,
  watchProblems,
} from './browser-helpers.ts';

const EMAIL = 'owner@acme.test';
const PASSWORD = 'a long dashboard password';

if (!HAVE_CHROMIUM) {
  console.warn(
    `SKIPPED dashboard browser tests: ${CHROMIUM} not found. Install Debian's Chromium ` +
      '(apt-get install chromium; .ci/run does) to run them.',
  );
}

describe.skipIf(!HAVE_CHROMIUM)('dashboard in Chromium', () => {
  let ctx: TestContext;
  let tenant: TestTenant;
  let base: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let problems: string[];
  let messageId: string;

  beforeAll(async () => {
    ensureDashboardBuilt();
    // A bounce host, so a new domain lists SPF and return-path records beside DKIM and DMARC.
    ctx = await createTestContext({ env: { POSTYARD_BOUNCE_HOST: 'bounces.postyard-test.example' } });
    tenant = await createTenant(ctx, 'Acme <noreply@acme.test>');
    await ctx.c.dashboard.createUser(tenant.tenantId, { email: EMAIL, password: PASSWORD });
    ({ messageId } = await seedTraffic(ctx, tenant.tenantId));
    base = await listen(ctx);
    browser = await launchBrowser();
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(10_000);
    page = await context.newPage();
    problems = watchProblems(page);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await ctx?.close();
  });

  it('sends a signed-out visit to the sign-in page and back after signing in (keyboard only)', async () => {
    await page.goto(`${base}/settings/webhooks`);
    await page.waitForURL(/\/login\?next=%2Fsettings%2Fwebhooks$/);
    // waitFor, not isVisible(): the URL changes before React has rendered the page, and on a
    // loaded machine (CI runs four test files at once on two cores) the heading comes later.
    await page.getByRole('heading', { name: 'Sign in' }).waitFor({ state: 'visible' });
    await screenshot(page, '01-login');

    // A wrong password is refused with a message.
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill('wrong password!');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'The email or password is incorrect' }).waitFor();

    await page.getByLabel('Email').focus();
    await page.keyboard.press('Control+A');
    await page.keyboard.type(EMAIL);
    await page.keyboard.press('Tab');
    await page.keyboard.type(PASSWORD);
    await page.keyboard.press('Enter');
    await page.waitForURL(`${base}/settings/webhooks`);
    await page.getByRole('heading', { name: 'Webhooks', level: 1 }).waitFor();
    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === 'postyard_session');
    expect(session?.httpOnly).toBe(true);
    expect(session?.sameSite).toBe('Lax');
  });

  it('shows the overview with charts and a delivery rate', async () => {
    await page.getByRole('link', { name: 'Overview' }).click();
    await page.waitForURL(`${base}/`);
    await page.locator('.chart-svg').first().waitFor();
    // Sent and delivered; deferred, bounced and complaints; opens and clicks (people and machines).
    expect(await page.locator('.chart-svg').count()).toBe(3);
    const rate = await page.locator('.stat-card', { hasText: 'Delivery rate' }).locator('dd').first().textContent();
    expect(rate).toMatch(/^\d+(\.\d)?%$/);
    expect(await page.locator('.stat-card', { hasText: 'Sent' }).locator('dd').first().textContent()).not.toBe('0');
    await screenshot(page, '02-overview');
    await page.getByRole('button', { name: 'Last 24 hours' }).click();
    await page.waitForURL(`${base}/?range=24h`);
  });

  it('creates an API key, shows it once with a copy button, and the key works on /v1 until revoked', async () => {
    await page.goto(`${base}/settings/api-keys`);
    await page.getByLabel('Name').fill('billing service');
    await page.getByLabel('All scopes').uncheck();
    await page.getByLabel('manage:suppressions').check();
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = page.getByTestId('secret-value');
    await secret.waitFor();
    const key = (await secret.textContent()) ?? '';
    expect(key).toMatch(/^pyk_[0-9A-Za-z]{44,}$/);
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
    await page.getByRole('button', { name: 'Copy', exact: true }).click();
    await page.getByRole('button', { name: 'Copied' }).waitFor();
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(key);
    await screenshot(page, '03-api-keys-created');

    // A real HTTP request with the new key.
    const ok = await fetch(`${base}/v1/suppressions`, { headers: { authorization: `Bearer ${key}` } });
    expect(ok.status).toBe(200);
    const denied = await fetch(`${base}/v1/events`, { headers: { authorization: `Bearer ${key}` } });
    expect(denied.status).toBe(403);

    await page.getByRole('button', { name: 'Done' }).click();
    const row = page.getByRole('row', { name: /billing service/ });
    await row.waitFor();
    await screenshot(page, '04-api-keys');
    await row.getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('button', { name: 'Revoke “billing service”' }).click();
    await row.waitFor({ state: 'detached' });
    const revoked = await fetch(`${base}/v1/suppressions`, { headers: { authorization: `Bearer ${key}` } });
    expect(revoked.status).toBe(401);
  });

  it('creates a webhook at /settings/webhooks, sends a test, and lists the delivery', async () => {
    const receiver: Receiver = await startReceiver(() => ({ status: 200, body: 'ok' }));
    try {
      await page.goto(`${base}/settings/webhooks`);
      await page.getByText('No webhooks').waitFor();
      await page.getByRole('button', { name: 'Add webhook' }).click();
      await page.getByLabel('Endpoint URL').fill(receiver.url);
      await page.getByLabel('Name').fill('Order system');
      await page.getByLabel('Only these:').check();
      await page.getByLabel('message.bounced').check();
      await page.getByRole('button', { name: 'Add webhook' }).click();
      const secret = (await page.getByTestId('secret-value').textContent()) ?? '';
      expect(secret).toMatch(/^whsec_/);
      await page.getByRole('button', { name: 'Done' }).click();

      const card = page.getByRole('article', { name: 'Order system' });
      await card.getByRole('button', { name: 'Send test' }).click();
      await card.getByRole('status').filter({ hasText: 'Test delivered: HTTP 200' }).waitFor();
      await receiver.waitFor((r) => r.length === 1);
      const body = verify(secret, receiver.received[0]!) as { type: string };
      expect(body.type).toBe('webhook.test');
      await card.getByRole('cell', { name: 'HTTP 200' }).waitFor();
      await screenshot(page, '05-webhooks');

      // Disable and enable; edit the events.
      await card.getByRole('button', { name: 'Disable' }).click();
      await card.getByText('disabled', { exact: true }).waitFor();
      await card.getByRole('button', { name: 'Enable' }).click();
      await card.getByText('active', { exact: true }).waitFor();
      await card.getByRole('button', { name: 'Edit' }).click();
      await card.getByLabel('All events').check();
      await card.getByRole('button', { name: 'Save changes' }).click();
      await card.getByText('All events').waitFor();
      await card.getByRole('button', { name: 'Rotate secret' }).click();
      await card.getByRole('button', { name: /Rotate now/ }).click();
      expect(await card.getByTestId('secret-value').textContent()).toMatch(/^whsec_/);
      expect(await card.getByTestId('secret-value').textContent()).not.toBe(secret);
    } finally {
      await receiver.close();
    }
  });

  it('adds, finds and removes a suppression, and imports a CSV file with a report', async () => {
    await page.goto(`${base}/suppressions`);
    await page.getByText('No suppressions').waitFor();
    await page.getByLabel('Address or domain', { exact: true }).fill('Blocked@Example.com');
    await page.getByLabel('Reason').first().selectOption('complaint');
    await page.getByRole('button', { name: 'Add suppression' }).click();
    const row = page.getByRole('row', { name: /blocked@example\.com/ });
    await row.waitFor();
    expect(await row.textContent()).toContain('dashboard');

    await page.getByLabel('CSV file', { exact: true }).setInputFiles({
      name: 'list.csv',
      mimeType: 'text/csv',
      buffer: Buffer.from(
        'identifier,type,reason_category\nann@example.org,,\nnot an address,,\nexample.net,domain,invalid\n',
      ),
    });
    await page.getByRole('button', { name: 'Import' }).click();
    const report = page.getByTestId('import-report');
    await report.waitFor();
    expect(await report.textContent()).toMatch(/Imported 2 rows; skipped 1\.Line 3:/);
    await page.getByRole('row', { name: /example\.net/ }).waitFor();

    await screenshot(page, '06-suppressions');
    // Search is an exact match after normalization (the whole address is case-insensitive).
    await page.getByLabel('Search address or domain').fill('Blocked@EXAMPLE.com');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.waitForURL(/identifier=Blocked%40EXAMPLE\.com/);
    await expect.poll(() => page.getByRole('row').count()).toBe(2);
    await row.getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('button', { name: 'Delete blocked@example.com' }).click();
    await row.waitFor({ state: 'detached' });
    const left = await ctx.c.suppressions.list(tenant.tenantId, { limit: 10, identifier: 'Blocked@example.com' });
    expect(left.data).toEqual([]);
  });

  it('shows SMTP credentials, sending domains, activity and a message with its transcript', async () => {
    await page.goto(`${base}/settings/smtp`);
    await page.getByLabel('Name').fill('CRM');
    await page.getByRole('button', { name: 'Create credential' }).click();
    expect(await page.getByTestId('secret-value').textContent()).toMatch(/^[0-9A-Za-z]{32}$/);
    await screenshot(page, '07-smtp');

    await page.goto(`${base}/domains`);
    await page.getByLabel('Domain', { exact: true }).fill('mail.acme.test');
    await page.getByRole('button', { name: 'Add domain' }).click();
    await page.getByRole('heading', { name: 'mail.acme.test' }).waitFor();
    expect(await page.getByRole('button', { name: 'Copy value' }).count()).toBeGreaterThanOrEqual(3);
    await screenshot(page, '08-domains');

    await page.goto(`${base}/activity`);
    await page.getByRole('table').waitFor();
    await page.getByRole('button', { name: 'Load more' }).waitFor();
    await screenshot(page, '09-activity');
    await page.getByLabel('Event type').selectOption('message.delivered');
    await page.getByLabel('Recipient').fill('ann@example.net');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/type=message\.delivered/);
    await page.getByRole('row').nth(1).waitFor();
    await expect.poll(() => page.getByRole('row').count()).toBe(2);

    await page.getByRole('link', { name: 'ann@example.net' }).first().click();
    await page.waitForURL(`${base}/messages/${messageId}`);
    await page.getByRole('heading', { name: 'Attempt 2' }).waitFor();
    await page.getByRole('article', { name: 'Attempt 2' }).getByText('SMTP transcript').click();
    await page.getByText('S: 220 2.0.0 Ready to start TLS').waitFor();
    await screenshot(page, '10-message');

    await page.goto(`${base}/settings/account`);
    await page.getByRole('heading', { name: 'Change password' }).waitFor();
    await screenshot(page, '11-account');
  });

  it('is usable at phone width', async () => {
    const phone = await context.newPage();
    const phoneProblems = watchProblems(phone);
    await phone.setViewportSize({ width: 390, height: 844 });
    await phone.goto(`${base}/`);
    await phone.locator('.chart-svg').first().waitFor();
    const width = await phone.evaluate('document.documentElement.scrollWidth');
    expect(width).toBeLessThanOrEqual(390);
    await screenshot(phone, '12-phone-overview');
    await phone.getByRole('button', { name: 'Menu' }).click();
    await phone.getByRole('link', { name: 'Webhooks' }).click();
    await phone.waitForURL(`${base}/settings/webhooks`);
    await screenshot(phone, '13-phone-webhooks');
    expect(phoneProblems).toEqual([]);
    await phone.close();
  });

  it('signs out, and the pages need a new sign-in', async () => {
    await page.goto(`${base}/`);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${base}/login`);
    await page.goto(`${base}/activity`);
    await page.waitForURL(/\/login\?next=%2Factivity$/);
    expect(problems).toEqual([]);
  });
});
