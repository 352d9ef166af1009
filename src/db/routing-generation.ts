import { sql } from 'kysely';
import type { Executor } from './executor.ts';

/**
 * The routing generation (migration 021): one counter, bumped in the transaction of every change
 * to where mail leaves from. Delivery nodes read it before each batch of source-address choices
 * and reload their routing table when it moved (source-picker.ts), so no change committed before
 * a message was claimed is missed, whichever node made it.
 */
export async function bumpRoutingGeneration(db: Executor): Promise<void> {
  await db.updateTable('routing_generation').set({ generation: sql`generation + 1` }).where('id', '=', 1).execute();
}

export async function routingGeneration(db: Executor): Promise<number> {
  const row = await db.selectFrom('routing_generation').select('generation').where('id', '=', 1).executeTakeFirst();
  return Number(row?.generation ?? 0);
}
