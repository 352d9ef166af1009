/**
 * Tracking defaults per tenant (docs/tracking.md "Defaults"): open and click tracking for each
 * mail type when a transmission does not say. Built in: off for transactional, on for marketing.
 * Stored as JSON in tenants.tracking_settings (null = built in).
 */
import type { Executor } from '../../db/executor.ts';

export type MailType = 'transactional' | 'marketing';

export interface TrackingSettings {
  open_tracking: Record<MailType, boolean>;
  click_tracking: Record<MailType, boolean>;
}

export const BUILT_IN: TrackingSettings = Object.freeze({
  open_tracking: { transactional: false, marketing: true },
  click_tracking: { transactional: false, marketing: true },
});

export type TrackingSettingsPatch = {
  [K in keyof TrackingSettings]?: Partial<Record<MailType, boolean>>;
};

function parse(text: string | null | undefined): TrackingSettings {
  if (!text) return BUILT_IN;
  const v = JSON.parse(text) as TrackingSettingsPatch;
  return merge(BUILT_IN, v);
}

function merge(base: TrackingSettings, p: TrackingSettingsPatch): TrackingSettings {
  return {
    open_tracking: { ...base.open_tracking, ...(p.open_tracking ?? {}) },
    click_tracking: { ...base.click_tracking, ...(p.click_tracking ?? {}) },
  };
}

export async function getTrackingSettings(db: Executor, tenantId: string): Promise<TrackingSettings> {
  const row = await db.selectFrom('tenants').select('tracking_settings').where('id', '=', tenantId).executeTakeFirst();
  return parse(row?.tracking_settings);
}

const perTransaction = new WeakMap<object, Map<string, Promise<TrackingSettings>>>();

/**
 * getTrackingSettings read once per transaction and tenant: the accepts of one group-commit batch
 * (src/db/group-commit.ts) share the read instead of one round trip each. Only for transactions
 * that do not change the settings themselves (the accept path).
 */
export function trackingSettingsOnce(trx: Executor, tenantId: string): Promise<TrackingSettings> {
  let memo = perTransaction.get(trx);
  if (!memo) {
    memo = new Map();
    perTransaction.set(trx, memo);
  }
  let hit = memo.get(tenantId);
  if (!hit) {
    hit = getTrackingSettings(trx, tenantId);
    memo.set(tenantId, hit);
  }
  return hit;
}

/** Applies `patch` over the tenant's current settings; returns the result. */
export async function patchTrackingSettings(
  db: Executor,
  tenantId: string,
  patch: TrackingSettingsPatch,
): Promise<TrackingSettings> {
  const next = merge(await getTrackingSettings(db, tenantId), patch);
  await db
    .updateTable('tenants')
    .set({ tracking_settings: JSON.stringify(next) })
    .where('id', '=', tenantId)
    .execute();
  return next;
}

/**
 * The tracking a transmission gets: its own options where given, else the tenant's defaults for
 * its mail type. Stored with the transmission, so later changes of the defaults do not change
 * mail already accepted.
 */
export function resolveTracking(
  settings: TrackingSettings,
  mailType: string,
  given: { open_tracking?: boolean | undefined; click_tracking?: boolean | undefined },
): { open_tracking: boolean; click_tracking: boolean } {
  const t: MailType = mailType === 'marketing' ? 'marketing' : 'transactional';
  return {
    open_tracking: given.open_tracking ?? settings.open_tracking[t],
    click_tracking: given.click_tracking ?? settings.click_tracking[t],
  };
}
