/**
 * The delivery worker's claimed-but-unfinished messages per tenant. A tenant holding TENANT_SHARE
 * of the worker's in-flight capacity is passed over by the claims, so the rest stays free for
 * the others' mail: one tenant's backlog never fills the worker (docs/pacing.md "Fairness").
 */
export const TENANT_SHARE = 0.75;

export class TenantShares {
  private readonly held = new Map<string, number>();

  constructor(private readonly maxInflight: number) {}

  claimed(tenants: Iterable<string>): void {
    for (const t of tenants) this.held.set(t, (this.held.get(t) ?? 0) + 1);
  }

  /** One of `tenant`'s messages was sent, recorded or put back. */
  settled(tenant: string): void {
    const left = (this.held.get(tenant) ?? 1) - 1;
    if (left > 0) this.held.set(tenant, left);
    else this.held.delete(tenant);
  }

  /** The tenants holding their full share. */
  full(): Set<string> {
    const cap = Math.max(1, Math.floor(this.maxInflight * TENANT_SHARE));
    const out = new Set<string>();
    for (const [t, n] of this.held) if (n >= cap) out.add(t);
    return out;
  }
}
