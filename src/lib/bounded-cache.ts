import { LRUCache } from 'lru-cache';

/**
 * A Map-like cache of at most `max` entries: when it is full, adding a key drops the least
 * recently used one (get and set count as a use). The hand-written caches it replaced emptied
 * themselves whole once full, so a burst of new keys (many tenants, many webhook URLs, a client
 * cycling addresses) threw away the hot entries too and sent every request back to the database
 * at once. Entries that need an age check keep their own expiry in the value, as before.
 *
 * Values may not be undefined or null (lru-cache's rule): wrap a "none" answer in an object.
 */
export class BoundedCache<K extends {}, V extends {}> extends LRUCache<K, V> {
  constructor(max: number) {
    super({ max });
  }
}
