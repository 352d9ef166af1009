/** Delivery units <-> POSTs bookkeeping (src/modules/webhooks/jobs.ts), without I/O. */
import { describe, expect, it } from 'vitest';
import type { EventsTable } from '../../db/schema.ts';
import { eventJson } from '../events/events.repo.ts';
import {
  buildJobs,
  type ClaimedWork,
  delayFor,
  finishUnit,
  jobBody,
  pickBatch,
  settleJob,
  unsend,
  unstarted,
} from './jobs.ts';
import type { SendResult } from './sender.ts';

const ev = (id: string): EventsTable => ({
  tenant_id: 't',
  id,
  type: 'message.delivered',
  created_at: '2026-11-22T10:00:00.000Z',
  transmission_id: null,
  message_id: null,
  recipient: 'a@example.com',
  mail_type: 'transactional',
  tags: '["x"]',
  metadata: '{"k":"v"}',
  data: '{"tls":true}',
});
const events = new Map(['e1', 'e2', 'e3', 'e4', 'e5'].map((id) => [id, eventJson(ev(id))]));
const unit = (id: string, ids: string[], attempts = 0): ClaimedWork => ({
  id,
  tenantId: 't',
  oldestEventAt: '2026-11-22T10:00:00.000Z',
  eventIds: ids,
  attempts,
});
const ok: SendResult = { ok: true, statusCode: 200, durationMs: 3, error: null, retryAfterMs: null, gone: false };
const fail: SendResult = {
  ok: false,
  statusCode: 500,
  durationMs: 3,
  error: 'HTTP 500',
  retryAfterMs: null,
  gone: false,
};
const policy = { delaysMs: [1000, 2000], jitter: 0 };
const ctx = { webhookId: 'w', tenantId: 't', batchId: null, policy, at: 1_000_000 };

describe('buildJobs', () => {
  it('single: one job per event, even for a unit holding several (policy switched after fan-out)', () => {
    const { jobs, empty } = buildJobs([unit('u1', ['e1', 'e2', 'e3']), unit('u2', ['e4'])], events, 'single', 100);
    expect(jobs.map((j) => j.ids)).toEqual([['e1'], ['e2'], ['e3'], ['e4']]);
    expect(jobs[0]!.parts[0]!.unit.outstanding).toBe(3);
    expect(empty).toEqual([]);
  });

  it('batch: packs several units into one POST and splits a unit larger than batch_max_size', () => {
    const packed = buildJobs([unit('u1', ['e1', 'e2']), unit('u2', ['e3'])], events, 'batch', 10);
    expect(packed.jobs).toHaveLength(1);
    expect(packed.jobs[0]!.parts.map((p) => p.eventIds)).toEqual([['e1', 'e2'], ['e3']]);
    const split = buildJobs([unit('u1', ['e1', 'e2', 'e3', 'e4', 'e5'])], events, 'batch', 2);
    expect(split.jobs.map((j) => j.ids.length)).toEqual([2, 2, 1]);
    expect(split.jobs[0]!.parts[0]!.unit.outstanding).toBe(3);
  });

  it('skips events that no longer exist; a unit left empty is reported', () => {
    const { jobs, empty } = buildJobs([unit('u1', ['gone1']), unit('u2', ['e1', 'gone2'])], events, 'batch', 10);
    expect(jobs[0]!.ids).toEqual(['e1']);
    expect(empty.map((u) => u.id)).toEqual(['u1']);
  });
});

describe('jobBody', () => {
  it('single: the event itself, webhook-id = event id; batch: {"batch_id","events"}', () => {
    const [single] = buildJobs([unit('u', ['e1'])], events, 'single', 1).jobs;
    const s = jobBody(single!, 'single');
    expect(s.msgId).toBe('e1');
    expect(JSON.parse(s.body)).toEqual({
      id: 'e1',
      type: 'message.delivered',
      created_at: '2026-11-22T10:00:00.000Z',
      tenant_id: 't',
      transmission_id: null,
      message_id: null,
      recipient: 'a@example.com',
      mail_type: 'transactional',
      tags: ['x'],
      metadata: { k: 'v' },
      data: { tls: true },
    });
    const [batch] = buildJobs([unit('u', ['e1', 'e2'])], events, 'batch', 10).jobs;
    const b = jobBody(batch!, 'batch');
    expect(b.msgId).toBe(b.batchId);
    expect(JSON.parse(b.body).events.map((e: { id: string }) => e.id)).toEqual(['e1', 'e2']);
  });
});

describe('settleJob', () => {
  it('finishes a unit when its last job ends; only failed events stay, one attempt more', () => {
    const { jobs } = buildJobs([unit('u1', ['e1', 'e2'], 0)], events, 'single', 1);
    expect(settleJob(jobs[0]!, ok, ctx).filter((w) => w.unit)).toEqual([]);
    const writes = settleJob(jobs[1]!, fail, ctx);
    const finished = writes.find((w) => w.unit);
    expect(finished?.unit).toEqual({
      id: 'u1',
      retry: { eventIds: ['e2'], attempts: 1, nextAt: new Date(1_001_000).toISOString() },
    });
    const log = writes.find((w) => w.log)?.log;
    expect(log).toMatchObject({ attempt: 1, outcome: 'retrying', status_code: 500, event_ids: '["e2"]' });
  });

  it('removes a delivered unit, and gives up after the last retry or on 410', () => {
    const done = settleJob(buildJobs([unit('u', ['e1'])], events, 'batch', 10).jobs[0]!, ok, ctx);
    expect(done.find((w) => w.unit)?.unit).toEqual({ id: 'u', retry: null });
    expect(done.find((w) => w.log)?.log?.outcome).toBe('delivered');
    const last = settleJob(buildJobs([unit('u', ['e1'], 2)], events, 'batch', 10).jobs[0]!, fail, ctx);
    expect(last.find((w) => w.unit)?.unit?.retry).toBeNull();
    expect(last.find((w) => w.log)?.log).toMatchObject({ attempt: 3, outcome: 'failed', next_attempt_at: null });
    const gone = settleJob(
      buildJobs([unit('u', ['e1'])], events, 'batch', 10).jobs[0]!,
      { ...fail, statusCode: 410, gone: true },
      ctx,
    );
    expect(gone.find((w) => w.unit)?.unit?.retry).toBeNull();
    expect(gone.find((w) => w.log)).toMatchObject({ ok: false, gone: true });
  });
});

describe('delayFor', () => {
  it('follows the schedule with jitter, or Retry-After clamped to 1 s .. 24 h', () => {
    const p = { delaysMs: [5000, 300_000], jitter: 0.1 };
    for (let i = 0; i < 50; i++) {
      const d = delayFor(p, 1, fail);
      expect(d).toBeGreaterThanOrEqual(4500);
      expect(d).toBeLessThanOrEqual(5500);
    }
    expect(delayFor(p, 2, { ...fail, retryAfterMs: 30_000 })).toBe(30_000);
    expect(delayFor(p, 1, { ...fail, retryAfterMs: 0 })).toBe(1000);
    expect(delayFor(p, 1, { ...fail, retryAfterMs: 10 ** 10 })).toBe(86_400_000);
  });
});

describe('unstarted', () => {
  it('gives back units none of whose jobs started; keeps jobs of a unit partly in flight', () => {
    // u1 has three single jobs, one of them already launched (not in the list); u2 has one.
    const { jobs } = buildJobs([unit('u1', ['e1', 'e2', 'e3']), unit('u2', ['e4'])], events, 'single', 1);
    const waiting = jobs.slice(1);
    const { release, keep } = unstarted(waiting);
    expect(release.map((u) => u.id)).toEqual(['u2']);
    expect(keep.map((j) => j.ids)).toEqual([['e2'], ['e3']]);
    expect(unstarted(jobs).release.map((u) => u.id)).toEqual(['u1', 'u2']);
    expect(unstarted(jobs).keep).toEqual([]);
  });

  it('keeps a batch job that mixes a releasable unit with one partly in flight', () => {
    // u1 (3 events) is split over two batch jobs of 2; the first is in flight. The second job
    // carries e3 of u1 and e4 of u2: it must go whole, so u2 is not released either.
    const { jobs } = buildJobs([unit('u1', ['e1', 'e2', 'e3']), unit('u2', ['e4'])], events, 'batch', 2);
    const { release, keep } = unstarted(jobs.slice(1));
    expect(release).toEqual([]);
    expect(keep).toHaveLength(1);
  });
});

describe('pickBatch', () => {
  const cfg = { batchMaxSize: 10, batchMaxWaitMs: 1000 };
  const at = (ms: number) => new Date(ms).toISOString();
  const u = (id: string, n: number, ms: number) => ({ id, event_count: n, next_attempt_at: at(ms) });

  it('waits for a full batch or the oldest unit to have waited batch_max_wait_ms', () => {
    expect(pickBatch([], cfg, 40, 5000)).toEqual({ waitUntil: Number.POSITIVE_INFINITY });
    expect(pickBatch([u('a', 3, 4500), u('b', 4, 4800)], cfg, 40, 5000)).toEqual({ waitUntil: 5500 });
    expect(pickBatch([u('a', 3, 3900), u('b', 4, 4800)], cfg, 40, 5000)).toEqual({ ids: ['a', 'b'] });
  });

  it('before the wait is over only whole batches go; at most maxEvents', () => {
    const due = [u('a', 10, 4900), u('b', 10, 4900), u('c', 5, 4900)];
    expect(pickBatch(due, cfg, 40, 5000)).toEqual({ ids: ['a', 'b'] });
    expect(pickBatch(due, cfg, 10, 5000)).toEqual({ ids: ['a'] });
    expect(pickBatch(due, cfg, 40, 6000)).toEqual({ ids: ['a', 'b', 'c'] });
  });
});

describe('unsend and finishUnit', () => {
  const three = () => buildJobs([unit('u', ['e1', 'e2', 'e3'], 1)], events, 'single', 1).jobs;

  it('a failure part-way: the failed event keeps the unit for its retry, the unsent ones split off', () => {
    const jobs = three();
    expect(unsend(jobs.slice(1))).toEqual([]); // e1 still in flight
    const w = settleJob(jobs[0]!, fail, ctx).find((x) => x.unit)!;
    expect(w.unit).toEqual({
      id: 'u',
      retry: { eventIds: ['e1'], attempts: 2, nextAt: new Date(1_002_000).toISOString() },
      split: {
        eventIds: ['e2', 'e3'],
        attempts: 1,
        nextAt: new Date(1_000_000).toISOString(),
        tenantId: 't',
        oldestEventAt: '2026-11-22T10:00:00.000Z',
      },
    });
  });

  it('delivered and unsent: the unit keeps the unsent events, due at once, attempts unchanged', () => {
    const jobs = three();
    unsend(jobs.slice(1));
    const w = settleJob(jobs[0]!, ok, ctx).find((x) => x.unit)!;
    expect(w.unit).toEqual({
      id: 'u',
      retry: { eventIds: ['e2', 'e3'], attempts: 1, nextAt: new Date(1_000_000).toISOString() },
    });
  });

  it('nothing sent: unsend finishes the unit as a plain release; gone drops what is unsent', () => {
    const jobs = three();
    const [u] = unsend(jobs);
    expect(finishUnit('w', u!, policy, 1_000_000).unit).toEqual({
      id: 'u',
      retry: { eventIds: ['e1', 'e2', 'e3'], attempts: 1, nextAt: new Date(1_000_000).toISOString() },
    });
    const again = three();
    unsend(again.slice(1));
    const gone = settleJob(again[0]!, { ...fail, statusCode: 410, gone: true }, ctx).find((x) => x.unit)!;
    expect(gone.unit).toEqual({ id: 'u', retry: null });
  });

  it('the last retry failing still hands the unsent events back with their own attempts', () => {
    const jobs = buildJobs([unit('u', ['e1', 'e2'], 2)], events, 'single', 1).jobs; // policy allows 2 retries
    unsend(jobs.slice(1));
    const w = settleJob(jobs[0]!, fail, ctx).find((x) => x.unit)!;
    expect(w.unit).toEqual({
      id: 'u',
      retry: { eventIds: ['e2'], attempts: 2, nextAt: new Date(1_000_000).toISOString() },
    });
  });
});
