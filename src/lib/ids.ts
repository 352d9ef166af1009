import { v7 as uuidv7, validate as uuidValidate } from 'uuid';

/** Time-ordered UUIDv7: index friendly, and keyset cursors over it follow creation order. */
export function newId(): string {
  return uuidv7();
}

export function isUuid(value: string): boolean {
  return uuidValidate(value);
}

/** The smallest UUIDv7 text of millisecond `ms` (ids compare as lower-case hex text). */
export function uuidFloor(ms: number): string {
  const hex = Math.max(0, Math.min(ms, 2 ** 48 - 1))
    .toString(16)
    .padStart(12, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-0000-0000-000000000000`;
}
