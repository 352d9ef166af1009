/**
 * Trusted devices (docs/dashboard.md "Sign-in limits"): a browser that signed in to an account
 * gets a long-lived cookie naming that account and a random device id, signed with a key derived
 * from the master key. A sign-in to that account presenting it is not held back by the account's
 * lock (only by the device's own budget), so strangers' guesses cannot lock the owner out of the
 * browsers they already use.
 *
 * Value: `1.<user id>.<device id>.<expiry, Unix seconds>.<mac>`, mac = base64url HMAC-SHA256 of
 * the part before it and the user's current password hash. Signed rather than stored: every node
 * checks it with the master key they share (no table, no lookup), and changing the password
 * (which makes a new salted hash) revokes every device of the user at once; the browser that
 * changed it gets a new cookie.
 */
import { createHmac, hkdfSync } from 'node:crypto';
import { randomBase62, safeEqual } from '../../lib/crypto.ts';

export const DEVICE_COOKIE = 'postyard_device';
/** A device stays trusted this long after its last successful sign-in (each renews it). */
export const DEVICE_TRUST_SECONDS = 90 * 24 * 3600;

const VERSION = '1';
const DEVICE_ID = /^[0-9A-Za-z]{22}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The account a device cookie is checked against. */
export interface DeviceAccount {
  id: string;
  password_hash: string | null;
}

export interface IssuedDevice {
  deviceId: string;
  /** The cookie's value. */
  value: string;
  maxAgeSeconds: number;
}

export class TrustedDevices {
  private readonly key: Buffer;

  constructor(masterKey: Buffer | Uint8Array) {
    this.key = Buffer.from(hkdfSync('sha256', masterKey, Buffer.alloc(0), 'postyard dashboard device v1', 32));
  }

  private mac(signed: string, account: DeviceAccount): string {
    return createHmac('sha256', this.key)
      .update(signed)
      .update('\0')
      .update(account.password_hash ?? '')
      .digest('base64url');
  }

  /** A cookie value trusting this browser for `account`; `deviceId` keeps a device's identity (and budget). */
  issue(account: DeviceAccount, deviceId = randomBase62(22), nowMs = Date.now()): IssuedDevice {
    const expires = Math.floor(nowMs / 1000) + DEVICE_TRUST_SECONDS;
    const signed = `${VERSION}.${account.id}.${deviceId}.${expires}`;
    return { deviceId, value: `${signed}.${this.mac(signed, account)}`, maxAgeSeconds: DEVICE_TRUST_SECONDS };
  }

  /** The device id of a cookie value issued for `account` and still valid, else null. */
  verify(raw: string | undefined, account: DeviceAccount, nowMs = Date.now()): string | null {
    if (!raw || raw.length > 200) return null;
    const parts = raw.split('.');
    if (parts.length !== 5) return null;
    const [version, userId, deviceId, expires, mac] = parts as [string, string, string, string, string];
    if (version !== VERSION || !UUID.test(userId) || !DEVICE_ID.test(deviceId) || !/^\d{1,12}$/.test(expires)) {
      return null;
    }
    const expected = this.mac(`${version}.${userId}.${deviceId}.${expires}`, account);
    if (!safeEqual(mac, expected)) return null;
    // The mac covers the user id, so a cookie of another account fails above; this is its reason.
    if (userId !== account.id || Number(expires) * 1000 <= nowMs) return null;
    return deviceId;
  }
}
