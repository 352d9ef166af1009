import type { LightMyRequestResponse } from 'fastify';
import type { App } from '../../src/app.ts';
import { createTenant, type TestContext, type TestTenant } from '../helpers/context.ts';

export const PASSWORD = 'correct horse battery staple';

/** The cookies a response sets, by name (value '' = cleared). */
export function setCookies(res: LightMyRequestResponse): Record<string, { value: string; raw: string }> {
  const header = res.headers['set-cookie'];
  const list = header === undefined ? [] : Array.isArray(header) ? header : [header];
  const out: Record<string, { value: string; raw: string }> = {};
  for (const raw of list) {
    const first = raw.split(';')[0] ?? '';
    const eq = first.indexOf('=');
    out[first.slice(0, eq)] = { value: first.slice(eq + 1), raw };
  }
  return out;
}

let ipCounter = 1;
/** A fresh client address, so sign-in limits of one test never leak into another. */
export function freshIp(): string {
  ipCounter++;
  return `10.${(ipCounter >> 16) & 255}.${(ipCounter >> 8) & 255}.${ipCounter & 255}`;
}

/**
 * A browser-like client over app.inject: keeps cookies, sends the CSRF token it was given in
 * X-CSRF-Token on state-changing requests (unless told otherwise), and a fixed client IP.
 */
export class DashClient {
  cookies = new Map<string, string>();
  csrf = '';
  constructor(
    readonly app: App,
    readonly ip = freshIp(),
  ) {}

  cookieHeader(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  async request(
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    url: string,
    opts: { body?: unknown; csrf?: string | null; headers?: Record<string, string>; raw?: string } = {},
  ): Promise<LightMyRequestResponse> {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    if (this.cookies.size) headers.cookie = this.cookieHeader();
    const csrf = opts.csrf === undefined ? this.csrf : opts.csrf;
    if (method !== 'GET' && csrf) headers['x-csrf-token'] = csrf;
    let payload: string | undefined;
    if (opts.raw !== undefined) payload = opts.raw;
    else if (opts.body !== undefined) {
      payload = JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await this.app.inject({
      method,
      url,
      headers,
      remoteAddress: this.ip,
      ...(payload !== undefined ? { payload } : {}),
    });
    for (const [name, c] of Object.entries(setCookies(res))) {
      if (c.value === '' || /Max-Age=0/i.test(c.raw)) this.cookies.delete(name);
      else this.cookies.set(name, c.value);
    }
    return res;
  }

  get(url: string) {
    return this.request('GET', url);
  }
  post(url: string, body?: unknown) {
    return this.request('POST', url, body === undefined ? {} : { body });
  }
  patch(url: string, body: unknown) {
    return this.request('PATCH', url, { body });
  }
  delete(url: string) {
    return this.request('DELETE', url);
  }

  /** Loads the session (and the pre-session CSRF token when signed out). */
  async session(): Promise<Record<string, unknown>> {
    const res = await this.get('/dashboard/api/session');
    const body = res.json() as Record<string, unknown>;
    if (typeof body.csrf_token === 'string') this.csrf = body.csrf_token;
    return body;
  }

  async login(email: string, password: string): Promise<LightMyRequestResponse> {
    await this.session();
    const res = await this.post('/dashboard/api/login', { email, password });
    if (res.statusCode === 200) this.csrf = (res.json() as { csrf_token: string }).csrf_token;
    return res;
  }
}

export interface DashUser {
  tenant: TestTenant;
  email: string;
  client: DashClient;
}

let userCounter = 0;

/** A tenant with a dashboard user (password PASSWORD), signed in. */
export async function signedInUser(ctx: TestContext): Promise<DashUser> {
  const tenant = await createTenant(ctx);
  const email = `user${++userCounter}-${Math.random().toString(36).slice(2, 8)}@example.com`;
  await ctx.c.dashboard.createUser(tenant.tenantId, { email, password: PASSWORD });
  const client = new DashClient(ctx.app);
  const res = await client.login(email, PASSWORD);
  if (res.statusCode !== 200) throw new Error(`login failed: ${res.statusCode} ${res.body}`);
  return { tenant, email, client };
}
