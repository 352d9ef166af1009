/**
 * The pacing page of the dashboard in a real browser (Debian's Chromium via playwright-core)
 * against the real app on 127.0.0.1: the site limits with this tenant's override marked, and the
 * suspensions an automation rule stored. Screenshots go to test-artifacts/dashboard/. Skips
 * (saying why) when /usr/bin/chromium is absent.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM, ensureDashboardBuilt, HAVE_CHROMIUM, screenshot } from '../dashboard/browser-helpers.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { openSignedIn } from '../helpers/dashboard-browser.ts';

const EMAIL = 'ops@acme.test';

if (!HAVE_CHROMIUM) console.warn(`SKIPPED pacing browser tests: ${CHROMIUM} not found.`);

describe.skipIf(!HAVE_CHROMIUM)('pacing page in Chromium', () => {
  let ctx: TestContext;
  let tenant: TestTenant;
  let other: TestTenant;
  let base: string;
  let browser: Browser;
  let page: Page;
  let problems: string[];

  beforeAll(async () => {
    ensureDashboardBuilt();
    ctx = await createTestContext();
    tenant = await createTenant(ctx, 'Acme <noreply@acme.test>');
    other = await createTenant(ctx, 'Other <noreply@other.test>');
    const put = await call(ctx.app, 'PUT', '/v1/pacing/sites/gmail', {
      key: tenant.apiKey,
      body: { messages_per_minute: 120 },
    });
    expect(put.statusCode, put.body).toBe(200);
    // Another tenant's override must not show on this tenant's page.
    await call(ctx.app, 'PUT', '/v1/pacing/sites/yahoo', { key: other.apiKey, body: { messages_per_minute: 7 } });
    await ctx.c.pacing.observe('yahoo', 'yahoo', '', '421 4.7.0 [TSS04] Messages from 127.0.0.1 temporarily deferred');
    ({ base, browser, page, problems } = await openSignedIn(ctx, tenant, { email: EMAIL, path: '/pacing' }));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await ctx?.close();
  });

  it("shows every site's limits, this tenant's override marked, and the active suspension", async () => {
    await page.getByRole('heading', { name: 'Pacing', level: 1 }).waitFor();
    const limits = page.getByRole('table', { name: 'Site limits' });
    await limits.getByTestId('site-default').waitFor();
    const gmail = (await limits.getByTestId('gmail-messages_per_minute').textContent()) ?? '';
    expect(gmail).toContain('120');
    expect(gmail).toContain('override');
    expect(gmail).toContain('default 3,000');
    const yahoo = (await limits.getByTestId('yahoo-messages_per_minute').textContent()) ?? '';
    expect(yahoo).toBe('600');
    const susp = page.getByRole('table', { name: 'Suspensions' }).getByTestId('suspension-yahoo');
    const text = (await susp.textContent()) ?? '';
    expect(text).toContain('yahoo-tss04');
    expect(text).toContain('default route');
    expect(text).toContain('TSS04');
    await screenshot(page, 'pacing-01-page');
    expect(problems).toEqual([]);
  });

  it('is in the navigation', async () => {
    await page.getByRole('link', { name: 'Overview' }).click();
    await page.getByRole('link', { name: 'Pacing' }).click();
    await page.waitForURL(`${base}/pacing`);
    await page.getByRole('table', { name: 'Site limits' }).waitFor();
  });
});
