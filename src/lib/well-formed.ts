/** A lone UTF-16 surrogate: a high one not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * The string with every lone surrogate replaced by U+FFFD, as UTF-8 encoding does anyway. Needed
 * where request text travels inside a JSON parameter: JSON.stringify writes a lone surrogate as
 * the escape `\udc00`, which JSON.parse accepts but PostgreSQL's json parser refuses (a 500).
 * (String.prototype.toWellFormed does the same from ES2024 on.)
 */
export function wellFormed(s: string): string {
  LONE_SURROGATE.lastIndex = 0;
  return LONE_SURROGATE.test(s) ? s.replace(LONE_SURROGATE, '\ufffd') : s;
}
