/**
 * The IP pool and warmup pages of the dashboard in a real browser (Debian's Chromium via
 * playwright-core) against the real app on 127.0.0.1: the pool list, a pool's addresses and the
 * warmup progress of its address (sent today / the stage's limit, counted by the real ledger).
 * Screenshots go to test-artifacts/dashboard/. Skips (saying why) when /usr/bin/chromium is absent.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WarmupLedger } from '../../src/modules/warmup/ledger.ts';
import { CHROMIUM, ensureDashboardBuilt, HAVE_CHROMIUM, screenshot } from '../dashboard/browser-helpers.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { openSignedIn } from '../helpers/dashboard-browser.ts';

const EMAIL = 'ops@acme.test';

if (!HAVE_CHROMIUM) console.warn(`SKIPPED IP pool browser tests: ${CHROMIUM} not found.`);

describe.skipIf(!HAVE_CHROMIUM)('IP pool and warmup pages in Chromium', () => {
  let ctx: TestContext;
  let tenant: TestTenant;
  let base: string;
  let browser: Browser;
  let page: Page;
  let problems: string[];
  let poolId: string;

  beforeAll(async () => {
    ensureDashboardBuilt();
    ctx = await createTestContext({ env: { POSTYARD_SOURCE_ADDRESSES: '127.0.0.2,127.0.0.3' } });
    tenant = await createTenant(ctx, 'Acme <noreply@acme.test>');
    const post = async (url: string, body: unknown) => {
      const res = await call(ctx.app, 'POST', url, { key: tenant.apiKey, body });
      expect(res.statusCode, res.body).toBe(201);
      return res.json();
    };
    const policy = await post('/v1/warmup-policies', {
      name: 'new ip',
      stages: [
        { day: 1, daily_limit: 50, hourly_limit: 20 },
        { day: 2, daily_limit: 100 },
      ],
      max_bounce_rate: 0.05,
      max_complaint_rate: 0.001,
    });
    const spill = await post('/v1/ip-pools', { name: 'spill', addresses: [{ address: '127.0.0.3' }] });
    // A warmup policy goes on an address dedicated to the tenant (docs/ip-pools.md "For the operator").
    await ctx.c.sourceAddresses.dedicate('127.0.0.2', tenant.tenantId);
    poolId = (
      await post('/v1/ip-pools', {
        name: 'marketing',
        mail_types: ['marketing'],
        overflow_pool_id: spill.id,
        addresses: [{ address: '127.0.0.2', weight: 2, warmup_policy_id: policy.id }],
      })
    ).id;
    // Three sends today, counted as delivery counts them.
    const ledger = new WarmupLedger(ctx.c.database.db, { now: () => Date.now() });
    const rules = { id: policy.id, stages: policy.stages, maxBounceRate: 0.05, maxComplaintRate: 0.001 };
    for (let i = 0; i < 3; i++) expect((await ledger.reserve('127.0.0.2', rules)).ok).toBe(true);
    ({ base, browser, page, problems } = await openSignedIn(ctx, tenant, { email: EMAIL, path: '/ip-pools' }));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await ctx?.close();
  });

  it('lists the pools with addresses, roles and overflow, and opens one', async () => {
    await page.getByRole('heading', { name: 'IP pools', level: 1 }).waitFor();
    const table = page.getByRole('table', { name: 'IP pools' });
    const row = table.getByRole('row').filter({ hasText: 'marketing' }).first();
    await row.waitFor();
    expect(await row.textContent()).toContain('127.0.0.2 (2)');
    expect(await row.textContent()).toContain('spill');
    await screenshot(page, 'ip-pools-01-list');
    await row.getByRole('link', { name: 'marketing' }).click();
    await page.waitForURL(`${base}/ip-pools/${poolId}`);
    await page.getByRole('heading', { name: 'marketing', level: 1 }).waitFor();
    const progress = page.getByRole('table', { name: 'Warmup progress' });
    await expect
      .poll(() => progress.getByTestId('warmup-127.0.0.2').getByTestId('sent-today').textContent())
      .toBe('3 / 50');
    await screenshot(page, 'ip-pools-02-detail');
  });

  it('shows warmup progress per address: warmup day, sent today / limit, this hour / limit', async () => {
    await page.getByRole('link', { name: 'Warmup' }).click();
    await page.waitForURL(`${base}/warmup`);
    await page.getByRole('heading', { name: 'Warmup', level: 1 }).waitFor();
    const row = page.getByTestId('warmup-127.0.0.2');
    await row.waitFor();
    const text = (await row.textContent()) ?? '';
    expect(text).toContain('day 1');
    expect(text).toContain('3 / 50');
    expect(text).toContain('3 / 20');
    expect(text).toContain('new ip');
    await screenshot(page, 'ip-pools-03-warmup');
    expect(problems).toEqual([]);
  });
});
