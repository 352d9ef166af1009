import { describe, expect, it } from 'vitest';
import { HANDBACK_SKIP_MS, SLOT_WAIT_MAX_MS, SLOT_WAIT_MS, SlotWaits } from '../../src/modules/pacing/slot-wait.ts';

/** The hand-back rules of src/modules/pacing/slot-wait.ts (docs/pacing.md), on an explicit clock. */
describe('slot waits', () => {
  it('the wait doubles with each hand-back of a bucket until a slot of it is taken here', () => {
    const w = new SlotWaits(50);
    let now = 1_000_000;
    expect(w.patience('gmail|a', now)).toBe(SLOT_WAIT_MS);
    const seen: number[] = [];
    for (let i = 0; i < 7; i++) {
      w.handedBack('gmail|a', ['t1'], now);
      seen.push(w.patience('gmail|a', now));
      now += 1_000;
    }
    expect(seen).toEqual([6_000, 12_000, 24_000, 48_000, SLOT_WAIT_MAX_MS, SLOT_WAIT_MAX_MS, SLOT_WAIT_MAX_MS]);
    // Other buckets are not affected; a slot taken here ends the streak.
    expect(w.patience('gmail|b', now)).toBe(SLOT_WAIT_MS);
    w.acquired('gmail|a');
    expect(w.patience('gmail|a', now)).toBe(SLOT_WAIT_MS);
  });

  it('a streak ends on its own two maximum waits after the last hand-back', () => {
    const w = new SlotWaits(50);
    w.handedBack('x', [], 0);
    w.handedBack('x', [], 0);
    expect(w.patience('x', 2 * SLOT_WAIT_MAX_MS - 1)).toBe(4 * SLOT_WAIT_MS);
    expect(w.patience('x', 2 * SLOT_WAIT_MAX_MS)).toBe(SLOT_WAIT_MS);
  });

  it("the handed-back tenants are skipped by this node's claims for a while, then not", () => {
    const w = new SlotWaits(50);
    w.handedBack('x', ['t1', 't2'], 0);
    expect(w.addSkipped(new Set(['full']), HANDBACK_SKIP_MS - 1)).toEqual(new Set(['full', 't1', 't2']));
    expect(w.addSkipped(new Set(), HANDBACK_SKIP_MS)).toEqual(new Set());
    // At least four poll intervals with a slow poll.
    const slow = new SlotWaits(1_000);
    slow.handedBack('x', ['t1'], 0);
    expect(slow.addSkipped(new Set(), 3_999)).toEqual(new Set(['t1']));
  });
});
