import { describe, expect, it } from 'vitest';
import { reverseName } from './network-checks.ts';

describe('reverseName', () => {
  it('reverses IPv4 octets under in-addr.arpa', () => {
    expect(reverseName('192.0.2.10')).toBe('10.2.0.192.in-addr.arpa');
  });
  it('expands IPv6 to 32 nibbles under ip6.arpa (RFC 3596 example)', () => {
    expect(reverseName('4321:0:1:2:3:4:567:89ab')).toBe(
      'b.a.9.8.7.6.5.0.4.0.0.0.3.0.0.0.2.0.0.0.1.0.0.0.0.0.0.0.1.2.3.4.ip6.arpa',
    );
    expect(reverseName('2001:db8::1')).toBe('1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa');
  });
});
