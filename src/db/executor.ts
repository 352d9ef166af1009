import type { Kysely, Transaction } from 'kysely';
import type { DB } from './schema.ts';

/** A repo function accepts either the database or an open transaction. */
export type Executor = Kysely<DB> | Transaction<DB>;

/** Runs `work` in `db` when that is a transaction already, else in a new transaction. */
export function inTransaction<T>(db: Executor, work: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  return db.isTransaction ? work(db as Transaction<DB>) : db.transaction().execute(work);
}
