/** Exactly the ten scopes of the seed's table (section 5). */
export const SCOPES = [
  'send:transmissions',
  'read:events',
  'manage:webhooks',
  'manage:sending-domains',
  'manage:templates',
  'manage:suppressions',
  'manage:api-keys',
  'manage:smtp-credentials',
  'manage:ip-pools',
  'manage:pacing',
] as const;

export type Scope = (typeof SCOPES)[number];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}
