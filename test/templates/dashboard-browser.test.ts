/**
 * The template pages of the dashboard in a real browser (Debian's Chromium via playwright-core)
 * against the real app on 127.0.0.1: create a template, edit it with the live preview (sample
 * data as JSON; a syntax error shows its part and line), save, publish, see the version history,
 * send a test to an address. Screenshots go to test-artifacts/dashboard/. Skips (saying why)
 * when /usr/bin/chromium is absent.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM, ensureDashboardBuilt, HAVE_CHROMIUM, screenshot } from '../dashboard/browser-helpers.ts';
import { createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { openSignedIn } from '../helpers/dashboard-browser.ts';

const EMAIL = 'designer@acme.test';

if (!HAVE_CHROMIUM) console.warn(`SKIPPED template browser tests: ${CHROMIUM} not found.`);

describe.skipIf(!HAVE_CHROMIUM)('template pages in Chromium', () => {
  let ctx: TestContext;
  let tenant: TestTenant;
  let base: string;
  let browser: Browser;
  let page: Page;
  let problems: string[];

  beforeAll(async () => {
    ensureDashboardBuilt();
    ctx = await createTestContext();
    tenant = await createTenant(ctx, 'Acme <noreply@acme.test>');
    ({ base, browser, page, problems } = await openSignedIn(ctx, tenant, {
      email: EMAIL,
      path: '/templates',
      viewport: { width: 1280, height: 1000 },
    }));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await ctx?.close();
  });

  it('creates a template and edits it with a live preview of the sample data', async () => {
    await page.getByRole('heading', { name: 'Templates', level: 1 }).waitFor();
    await page.getByText('No templates yet').waitFor();
    await page.getByLabel('Name').fill('welcome');
    await page.getByRole('button', { name: 'Create template' }).click();
    await page.waitForURL(/\/templates\/[0-9a-f-]{36}$/);
    await page.getByRole('heading', { name: 'welcome', level: 1 }).waitFor();

    await page.getByLabel('HTML').fill('<h1>Hi {{first}}</h1><ul>{{#each items}}<li>{{this}}</li>{{/each}}</ul>');
    await page.getByLabel('Sample data (JSON)').fill('{"first":"Ann <3","items":["tea","cake"]}');
    await expect.poll(() => page.getByTestId('preview-subject').textContent()).toBe('Hello Ann <3');
    await expect.poll(() => page.getByTestId('preview-text').textContent()).toContain('HI ANN <3');
    expect(await page.getByTestId('preview-text').textContent()).toContain('* tea');
    // The html preview is escaped and sandboxed.
    const frame = page.frameLocator('iframe[title="HTML preview"]');
    expect(await frame.locator('h1').textContent()).toBe('Hi Ann <3');
    expect(await frame.locator('li').count()).toBe(2);
    await screenshot(page, 'templates-01-editor');

    // A syntax error names the part and the line.
    await page.getByLabel('HTML').fill('<p>\n{{#if first}}unclosed');
    await page.getByRole('alert').filter({ hasText: 'html: line 2' }).waitFor();
    await page.getByLabel('HTML').fill('<p>Hi {{first}}</p>');
    await expect.poll(() => page.getByTestId('preview-text').textContent()).toContain('Hi Ann <3');
  });

  it('saves a draft, publishes it and lists the versions', async () => {
    await page.getByLabel('Subject').fill('Welcome, {{first}}');
    await page.getByRole('button', { name: 'Save draft' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved as draft version 2' }).waitFor();
    await page.getByRole('button', { name: 'Publish v2' }).click();
    await page.getByRole('status').filter({ hasText: 'Published version 2' }).waitFor();
    const versions = page.getByRole('list', { name: 'Versions' });
    await versions.getByText('v2').waitFor();
    expect(await versions.locator('li').count()).toBe(2);
    expect(await versions.locator('li').first().textContent()).toContain('published');
    await screenshot(page, 'templates-02-published');

    const id = page.url().split('/').pop() as string;
    const t = await ctx.c.templates.get(tenant.tenantId, id);
    expect(t.published).toMatchObject({ version: 2, subject: 'Welcome, {{first}}', html: '<p>Hi {{first}}</p>' });
  });

  it('sends a test to an address through the accept path', async () => {
    await page.getByLabel('To', { exact: true }).fill('tester@example.net');
    await page.getByRole('button', { name: 'Send test' }).click();
    await page.getByRole('status').filter({ hasText: 'Test sent to tester@example.net' }).waitFor();
    const msg = await ctx.c.database.db
      .selectFrom('messages')
      .select(['recipient', 'substitution_data', 'state'])
      .where('tenant_id', '=', tenant.tenantId)
      .executeTakeFirstOrThrow();
    expect(msg.recipient).toBe('tester@example.net');
    expect(JSON.parse(msg.substitution_data ?? '{}')).toEqual({ first: 'Ann <3', items: ['tea', 'cake'] });
    expect(msg.state).toBe('queued');
  });

  it('lists the template with its published version', async () => {
    await page.getByRole('link', { name: 'Templates' }).first().click();
    await page.waitForURL(`${base}/templates`);
    const row = page.getByRole('row', { name: /welcome/ });
    await row.waitFor();
    expect(await row.textContent()).toContain('v2');
    await screenshot(page, 'templates-03-list');
    expect(problems).toEqual([]);
  });
});
