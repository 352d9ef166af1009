/**
 * The states of a message row (docs/api.md "Transmissions"): `queued` -> `sending` ->
 * `delivered` | `deferred` (retried later) | `bounced` | `failed`; `suppressed` at acceptance.
 */
export type MessageState = 'queued' | 'sending' | 'deferred' | 'delivered' | 'bounced' | 'failed' | 'suppressed';

/**
 * States a delivery worker may claim a message in, once its next_attempt_at is due: `sending`
 * rows are claimable again once their lease ran out. Also the states in which a message is
 * still pending (not final). Migration 005's partial index `messages_claimable` is declared with
 * this same list (frozen there as literals); the claim must use it verbatim for the planners to
 * pick that index.
 */
export const CLAIMABLE_STATES = ['queued', 'deferred', 'sending'] as const satisfies readonly MessageState[];

export type ClaimableState = (typeof CLAIMABLE_STATES)[number];

/** `state in ('queued', 'deferred', 'sending')`: literals, not parameters (see above). */
export const CLAIMABLE_SQL = `state in (${CLAIMABLE_STATES.map((s) => `'${s}'`).join(', ')})`;

export function isClaimable(state: MessageState): state is ClaimableState {
  return (CLAIMABLE_STATES as readonly MessageState[]).includes(state);
}

/** The state a released message goes back to: due again, no attempt counted. */
export const RELEASED_STATE_SQL = `case when attempt_count > 0 then 'deferred' else 'queued' end`;
