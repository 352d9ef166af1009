import { describe, expect, it } from 'vitest';
import { addressBudgetKey } from './client-address.ts';

describe('addressBudgetKey', () => {
  it('keeps IPv4 addresses as they are', () => {
    expect(addressBudgetKey('203.0.113.7')).toBe('203.0.113.7');
    expect(addressBudgetKey('127.0.0.1')).toBe('127.0.0.1');
  });

  it('treats IPv4-mapped IPv6 as its IPv4 address, however it is written', () => {
    expect(addressBudgetKey('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(addressBudgetKey('::FFFF:cb00:7107')).toBe('203.0.113.7');
    expect(addressBudgetKey('0:0:0:0:0:ffff:203.0.113.7')).toBe('203.0.113.7');
  });

  it('groups IPv6 by /64, the same key for every spelling and every address of the prefix', () => {
    const key = '2001:db8:1:2::/64';
    for (const a of [
      '2001:db8:1:2::1',
      '2001:0db8:0001:0002:ffff:ffff:ffff:ffff',
      '2001:DB8:1:2:a:b:c:d',
      '2001:db8:1:2::1%eth0',
      '2001:db8:1:2::10.0.0.1',
    ]) {
      expect(addressBudgetKey(a), a).toBe(key);
    }
    expect(addressBudgetKey('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(addressBudgetKey('::1')).toBe('0:0:0:0::/64');
    expect(addressBudgetKey('::')).toBe('0:0:0:0::/64');
    expect(addressBudgetKey('fe80::1')).toBe('fe80:0:0:0::/64');
  });

  it('leaves what is not an IP address as it is', () => {
    for (const a of ['', 'unknown', '2001:db8::1::2', '1.2.3']) expect(addressBudgetKey(a)).toBe(a);
  });
});
