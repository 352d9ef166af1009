import { v7 as uuidv7, validate as uuidValidate } from 'uuid';

/** Time-ordered UUIDv7: index friendly, and keyset cursors over it follow creation order. */
export function newId(): string {
  return uuidv7();
}

export function isUuid(value: string): boolean {
  return uuidValidate(value);
}
