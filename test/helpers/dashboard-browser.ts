/**
 * The start of every dashboard page test in Chromium: a dashboard user for the tenant, the app
 * listening on 127.0.0.1, a browser page watched for console errors, signed in through the real
 * sign-in page and landed on the page under test. The browser harness itself (Chromium path,
 * launch flags, screenshots) is test/dashboard/browser-helpers.ts.
 */
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, listen, watchProblems } from '../dashboard/browser-helpers.ts';
import type { TestContext, TestTenant } from './context.ts';

export const DASHBOARD_PASSWORD = 'a long dashboard password';

export interface SignedInPage {
  /** http://127.0.0.1:<port> */
  base: string;
  /** Close it in afterAll (before the context). */
  browser: Browser;
  page: Page;
  /** Console errors and uncaught exceptions so far (watchProblems). */
  problems: string[];
}

export async function openSignedIn(
  ctx: TestContext,
  tenant: TestTenant,
  opts: { email: string; path: string; viewport?: { width: number; height: number } },
): Promise<SignedInPage> {
  await ctx.c.dashboard.createUser(tenant.tenantId, { email: opts.email, password: DASHBOARD_PASSWORD });
  const base = await listen(ctx);
  const browser = await launchBrowser();
  try {
    const context = await browser.newContext({ viewport: opts.viewport ?? { width: 1280, height: 900 } });
    context.setDefaultTimeout(15_000);
    const page = await context.newPage();
    const problems = watchProblems(page);
    await page.goto(`${base}/login?next=${encodeURIComponent(opts.path)}`);
    await page.getByLabel('Email').fill(opts.email);
    await page.getByLabel('Password').fill(DASHBOARD_PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${base}${opts.path}`);
    return { base, browser, page, problems };
  } catch (err) {
    // The caller never got the browser to close: do it here, or Chromium outlives the test.
    await browser.close();
    throw err;
  }
}
