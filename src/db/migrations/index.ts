import type { Migration } from 'kysely';
import * as m001 from './001_foundation.ts';
import * as m002 from './002_sending_domains.ts';
import * as m003 from './003_webhooks.ts';
import * as m004 from './004_dashboard.ts';
import * as m005 from './005_claimable_index.ts';
import * as m006 from './006_attempt_tls_policy.ts';
import * as m007 from './007_nodes.ts';
import * as m008 from './008_tenant_domain_limit.ts';
import * as m009 from './009_email_identifier_case.ts';
import * as m010 from './010_tenant_rate_limit.ts';
import * as m011 from './011_templates.ts';
import * as m012 from './012_tracking.ts';
import * as m014 from './014_ip_pools.ts';
import * as m015 from './015_pacing.ts';
import * as m016 from './016_events_indexes.ts';
import * as m017 from './017_events_partitions.ts';
import * as m018 from './018_tracking_links.ts';
import * as m019 from './019_connection_slots.ts';
import * as m020 from './020_waiting_indexes.ts';
import * as m021 from './021_source_addresses.ts';
import * as m022 from './022_queue_vacuum.ts';
import * as m023 from './023_recipient_roles.ts';

/** Ordered, frozen migrations shared by both dialects. Add new ones at the end. */
export const migrations: Record<string, Migration> = {
  '001_foundation': m001,
  '002_sending_domains': m002,
  '003_webhooks': m003,
  '004_dashboard': m004,
  '005_claimable_index': m005,
  '006_attempt_tls_policy': m006,
  '007_nodes': m007,
  '008_tenant_domain_limit': m008,
  '009_email_identifier_case': m009,
  '010_tenant_rate_limit': m010,
  '011_templates': m011,
  '012_tracking': m012,
  '014_ip_pools': m014,
  '015_pacing': m015,
  '016_events_indexes': m016,
  '017_events_partitions': m017,
  '018_tracking_links': m018,
  '019_connection_slots': m019,
  '020_waiting_indexes': m020,
  '021_source_addresses': m021,
  '022_queue_vacuum': m022,
  '023_recipient_roles': m023,
};
