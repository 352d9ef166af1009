/**
 * Resources of the sending infrastructure: IP pools, warmup policies and pacing (docs/ip-pools.md,
 * docs/pacing.md). Kept apart from resources.ts only to keep files short; same base class.
 */
import type { RequestOptions } from './http.ts';
import { type Body, type Filters, type Query, Resource } from './resources.ts';

export class IpPools extends Resource {
  /** Creates a pool from this host's source addresses (POSTYARD_SOURCE_ADDRESSES). */
  create(body: Body<'ipPools.create'>, opts?: RequestOptions) {
    return this.call('ipPools.create', { json: body }, opts);
  }
  list(query?: Query<'ipPools.list'>, opts?: RequestOptions) {
    return this.call('ipPools.list', { query }, opts);
  }
  iterate(filters?: Filters<'ipPools.list'>, opts?: RequestOptions) {
    return this.pages('ipPools.list', undefined, filters, opts);
  }
  get(id: string, opts?: RequestOptions) {
    return this.call('ipPools.get', { id }, opts);
  }
  /** Changes the fields given; `addresses` replaces the whole list. */
  update(id: string, body: Body<'ipPools.update'>, opts?: RequestOptions) {
    return this.call('ipPools.update', { id, json: body }, opts);
  }
  /** Deletes it (409 `in_use` while another pool overflows into it). */
  delete(id: string, opts?: RequestOptions): Promise<void> {
    return this.call('ipPools.delete', { id }, opts);
  }
}

export class WarmupPolicies extends Resource {
  /** Creates a policy: stages of daily (and hourly) limits per address, and the rates that pause it. */
  create(body: Body<'warmupPolicies.create'>, opts?: RequestOptions) {
    return this.call('warmupPolicies.create', { json: body }, opts);
  }
  list(query?: Query<'warmupPolicies.list'>, opts?: RequestOptions) {
    return this.call('warmupPolicies.list', { query }, opts);
  }
  iterate(filters?: Filters<'warmupPolicies.list'>, opts?: RequestOptions) {
    return this.pages('warmupPolicies.list', undefined, filters, opts);
  }
  get(id: string, opts?: RequestOptions) {
    return this.call('warmupPolicies.get', { id }, opts);
  }
  /** Changes the fields given; `stages` replaces the whole list. */
  update(id: string, body: Body<'warmupPolicies.update'>, opts?: RequestOptions) {
    return this.call('warmupPolicies.update', { id, json: body }, opts);
  }
  /** Deletes it (409 `in_use` while a pool address uses it). */
  delete(id: string, opts?: RequestOptions): Promise<void> {
    return this.call('warmupPolicies.delete', { id }, opts);
  }
}

export class Pacing extends Resource {
  /** Every destination site of the server's pacing file with this tenant's limits (one page). */
  listSites(opts?: RequestOptions) {
    return this.call('pacing.listSites', {}, opts);
  }
  /** One site (`'gmail'`, `'yahoo'`, ...): this tenant's overrides, the defaults and what applies. */
  getSite(site: string, opts?: RequestOptions) {
    return this.call('pacing.getSite', { params: { site } }, opts);
  }
  /**
   * Sets this tenant's limits for a site; a limit absent or null is the shipped default (so this
   * replaces every override of the site). Applies on every node within 5 s. Safe to repeat.
   */
  putSite(site: string, body: Body<'pacing.putSite'>, opts?: RequestOptions) {
    return this.call('pacing.putSite', { params: { site }, json: body }, opts);
  }
  /** Site x source address pairs an automation rule suspended or slowed, and until when (one page). */
  listSuspensions(opts?: RequestOptions) {
    return this.call('pacing.listSuspensions', {}, opts);
  }
}
