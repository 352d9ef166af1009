/**
 * The client's IP pool, warmup policy, pacing and sending-domain update methods against the real
 * server (both backends): typed calls, path parameters, Idempotency-Key on creates, typed errors.
 */
import { type IpPool, Postyard, PostyardConflictError, PostyardNotFoundError } from '@postyard/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LiveServer, startLiveServer } from './helpers.ts';

let live: LiveServer;
let client: Postyard;

beforeAll(async () => {
  live = await startLiveServer({ env: { POSTYARD_SOURCE_ADDRESSES: '127.0.0.2,127.0.0.3' } });
  client = new Postyard({ apiKey: live.tenant.apiKey, baseUrl: live.baseUrl });
});
afterAll(async () => {
  await live?.close();
});

describe('warmup policies and IP pools', () => {
  it('create (replayed by Idempotency-Key), get, list, iterate, update, delete; in_use is a conflict', async () => {
    const stages = [
      { day: 1, daily_limit: 50, hourly_limit: 10 },
      { day: 4, daily_limit: 500 },
    ];
    const body = { name: 'slow start', stages, max_bounce_rate: 0.05, max_complaint_rate: 0.001 };
    const policy = await client.warmupPolicies.create(body, { idempotencyKey: 'wp-1' });
    expect(policy).toMatchObject({ name: 'slow start', stages: [stages[0], { ...stages[1], hourly_limit: null }] });
    expect(await client.warmupPolicies.create(body, { idempotencyKey: 'wp-1' })).toEqual(policy);
    expect(await client.warmupPolicies.get(policy.id)).toEqual(policy);
    expect((await client.warmupPolicies.list()).data.map((p) => p.id)).toEqual([policy.id]);
    const updated = await client.warmupPolicies.update(policy.id, { max_bounce_rate: 0.03 });
    expect(updated).toMatchObject({ id: policy.id, max_bounce_rate: 0.03, stages: policy.stages });

    // A warmup policy goes on an address dedicated to the tenant (docs/ip-pools.md "For the operator").
    await live.ctx.c.sourceAddresses.dedicate('127.0.0.2', live.tenant.tenantId);
    const pool = await client.ipPools.create({
      name: 'marketing',
      addresses: [{ address: '127.0.0.2', weight: 3, warmup_policy_id: policy.id }, { address: '127.0.0.3' }],
      mail_types: ['marketing'],
    });
    expect(pool).toMatchObject({
      name: 'marketing',
      addresses: [
        { address: '127.0.0.2', weight: 3, warmup_policy_id: policy.id },
        { address: '127.0.0.3', weight: 1, warmup_policy_id: null },
      ],
      mail_types: ['marketing'],
    });
    expect(await client.ipPools.get(pool.id)).toEqual(pool);
    const other = await client.ipPools.create({ name: 'transactional', addresses: [{ address: '127.0.0.3' }] });
    const all: IpPool[] = [];
    for await (const p of client.ipPools.iterate({ limit: 1 })) all.push(p);
    expect(all.map((p) => p.id).sort()).toEqual([pool.id, other.id].sort());
    expect((await client.ipPools.list({ limit: 1 })).next_cursor).not.toBeNull();

    // The policy is attached to a pool address: deleting it is refused, typed.
    const refused = await client.warmupPolicies.delete(policy.id).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(PostyardConflictError);
    expect(refused).toMatchObject({ status: 409, code: 'in_use' });
    const renamed = await client.ipPools.update(pool.id, { name: 'promo', addresses: [{ address: '127.0.0.2' }] });
    expect(renamed).toMatchObject({ name: 'promo', addresses: [{ address: '127.0.0.2', warmup_policy_id: null }] });
    const taken = await client.ipPools.update(other.id, { name: 'promo' }).catch((e: unknown) => e);
    expect(taken).toMatchObject({ status: 409, code: 'name_taken' });

    await client.warmupPolicies.delete(policy.id);
    await client.ipPools.delete(pool.id);
    await expect(client.ipPools.get(pool.id)).rejects.toBeInstanceOf(PostyardNotFoundError);
    await expect(client.warmupPolicies.get(policy.id)).rejects.toMatchObject({ status: 404 });
  });
});

describe('pacing', () => {
  it('listSites, getSite, putSite (by site name in the path), listSuspensions', async () => {
    const sites = await client.pacing.listSites();
    expect(sites.next_cursor).toBeNull();
    expect(sites.data.map((s) => s.site)).toEqual(expect.arrayContaining(['gmail', 'yahoo']));
    const yahoo = await client.pacing.getSite('yahoo');
    expect(yahoo).toMatchObject({ site: 'yahoo', max_connections: null, updated_at: null });
    expect(yahoo.effective).toEqual(yahoo.defaults);

    const put = await client.pacing.putSite('yahoo', { max_connections: 2, messages_per_minute: 300 });
    expect(put).toMatchObject({ max_connections: 2, messages_per_minute: 300, messages_per_hour: null });
    expect(put.effective).toEqual({ ...yahoo.defaults, max_connections: 2, messages_per_minute: 300 });
    expect(await client.pacing.getSite('yahoo')).toEqual(put);
    // PUT replaces: limits not sent return to the default.
    expect(await client.pacing.putSite('yahoo', {})).toMatchObject({
      max_connections: null,
      effective: yahoo.defaults,
    });

    // The site is URI-encoded into the path: a name with a slash is an unknown site, not another route.
    await expect(client.pacing.getSite('yahoo/../gmail')).rejects.toBeInstanceOf(PostyardNotFoundError);
    await expect(client.pacing.putSite('no-such-site', { max_connections: 1 })).rejects.toMatchObject({
      status: 404,
    });
    expect(await client.pacing.listSuspensions()).toEqual({ data: [], next_cursor: null });
  });
});

describe('sending domains', () => {
  it('update sets and removes the tracking host name (a tracking record in dns_records)', async () => {
    const d = await client.sendingDomains.create({ domain: 'mail.infra-test.example' });
    const set = await client.sendingDomains.update(d.id, { tracking_hostname: 'click.mail.infra-test.example' });
    expect(set.dns_records.find((r) => r.purpose === 'tracking')).toMatchObject({
      name: 'click.mail.infra-test.example',
      type: 'CNAME',
      status: 'pending',
    });
    const removed = await client.sendingDomains.update(d.id, { tracking_hostname: null });
    expect(removed.dns_records.map((r) => r.purpose)).not.toContain('tracking');
    const bad = await client.sendingDomains.update(d.id, { tracking_hostname: 'click.other.example' }).catch((e) => e);
    expect(bad).toMatchObject({ status: 422 });
    expect(bad.fieldErrors).toHaveProperty('tracking_hostname');
  });
});
