import { describe, expect, it } from 'vitest';
import { dialectOf, dialectSql, isPostgres, shapedSql, sqliteFromNumbered, sqlText } from './dialect.ts';

const pg = { dialect: 'postgres' } as const;
const lite = { dialect: 'sqlite' } as const;

describe('dialect', () => {
  it('tells the dialect from the Database handle', () => {
    expect(dialectOf(pg)).toBe('postgres');
    expect(isPostgres(pg)).toBe(true);
    expect(isPostgres(lite)).toBe(false);
  });

  it('declares one statement for both dialects and picks the running one', () => {
    const s = dialectSql({ sqlite: 'select ? where ?', sqliteArgs: [1, 0], postgres: 'select $2 where $1' });
    expect(sqlText(pg, s)).toBe('select $2 where $1');
    expect(sqlText(lite, s)).toBe('select ? where ?');
    expect(Object.isFrozen(s)).toBe(true);
  });

  it('derives the SQLite text and argument order from $N placeholders', () => {
    const text = 'insert into t values ($1, $2, $1) on conflict do update set x = greatest(x, $3)';
    expect(sqliteFromNumbered(text)).toEqual({
      sqlite: 'insert into t values (?, ?, ?) on conflict do update set x = greatest(x, ?)',
      sqliteArgs: [0, 1, 0, 2],
    });
  });

  it('refuses sqliteArgs that do not match the placeholders', () => {
    expect(() => dialectSql({ sqlite: 'select ?', sqliteArgs: [0, 1], postgres: 'select $1' })).toThrow(/sqliteArgs/);
  });

  it('builds shaped statements once per dialect and shape', () => {
    let builds = 0;
    const inList = shapedSql(10, (p, _d, n: number) => {
      builds++;
      return `in (${Array.from({ length: n }, (_, i) => p(i + 1)).join(', ')})`;
    });
    expect(inList(pg, 3)).toBe('in ($1, $2, $3)');
    expect(inList(lite, 3)).toBe('in (?, ?, ?)');
    expect(inList(pg, 3)).toBe('in ($1, $2, $3)');
    expect(builds).toBe(2);
  });
});
