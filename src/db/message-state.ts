/**
 * The states of a message row (docs/api.md "Transmissions"): `queued` -> `sending` ->
 * `delivered` | `deferred` (retried later) | `bounced` | `failed`; `suppressed` at acceptance.
 */
export type MessageState = 'queued' | 'sending' | 'deferred' | 'delivered' | 'bounced' | 'failed' | 'suppressed';

/**
 * States a delivery worker may claim a message in, once its next_attempt_at is due: `sending`
 * rows are claimable again once their lease ran out. Also the states in which a message is
 * still pending (not final). A claim reads the waiting ones (WAITING_STATES) and the `sending`
 * ones whose lease ran out, by two indexes (migration 020).
 */
export const CLAIMABLE_STATES = ['queued', 'deferred', 'sending'] as const satisfies readonly MessageState[];

export type ClaimableState = (typeof CLAIMABLE_STATES)[number];

/**
 * States of a message waiting for a claim (not leased). The claim's indexes hold only these rows
 * (migration 020: messages_waiting, messages_waiting_fair, same literals): a claim takes a row out
 * of them and into messages_leased (`sending`), where a lease that ran out is found again.
 */
export const WAITING_STATES = ['queued', 'deferred'] as const satisfies readonly MessageState[];

/** `state in ('queued', 'deferred')`: literals, for the planners to match the partial indexes. */
export const WAITING_SQL = `state in (${WAITING_STATES.map((s) => `'${s}'`).join(', ')})`;

export function isClaimable(state: MessageState): state is ClaimableState {
  return (CLAIMABLE_STATES as readonly MessageState[]).includes(state);
}

/** The state a released message goes back to: due again, no attempt counted. */
export const RELEASED_STATE_SQL = `case when attempt_count > 0 then 'deferred' else 'queued' end`;
