import type { Executor } from '../../db/executor.ts';
import type { TemplatesTable, TemplateVersionsTable } from '../../db/schema.ts';

/** Template rows and their versions. Every query is scoped by tenant_id first. */

export async function insertTemplate(db: Executor, row: TemplatesTable): Promise<void> {
  await db.insertInto('templates').values(row).execute();
}

export async function insertVersion(db: Executor, row: TemplateVersionsTable): Promise<void> {
  await db.insertInto('template_versions').values(row).execute();
}

export async function findTemplate(db: Executor, tenantId: string, id: string): Promise<TemplatesTable | undefined> {
  return db
    .selectFrom('templates')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function findTemplateByName(
  db: Executor,
  tenantId: string,
  name: string,
): Promise<TemplatesTable | undefined> {
  return db
    .selectFrom('templates')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('name', '=', name)
    .executeTakeFirst();
}

/** The given versions of one template (e.g. its draft and published ones). */
export async function findVersions(
  db: Executor,
  tenantId: string,
  templateId: string,
  versions: number[],
): Promise<TemplateVersionsTable[]> {
  if (versions.length === 0) return [];
  return db
    .selectFrom('template_versions')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('template_id', '=', templateId)
    .where('version', 'in', versions)
    .execute();
}

/** Versions newest first, `limit + 1` rows (keyset on the version number). */
export async function listVersions(
  db: Executor,
  tenantId: string,
  templateId: string,
  opts: { limit: number; beforeVersion?: number },
): Promise<TemplateVersionsTable[]> {
  let q = db
    .selectFrom('template_versions')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('template_id', '=', templateId);
  if (opts.beforeVersion !== undefined) q = q.where('version', '<', opts.beforeVersion);
  return q
    .orderBy('version', 'desc')
    .limit(opts.limit + 1)
    .execute();
}

/** The highest version number of the template (versions are never deleted while it exists). */
export async function latestVersionNumber(db: Executor, tenantId: string, templateId: string): Promise<number> {
  const row = await db
    .selectFrom('template_versions')
    .select((eb) => eb.fn.max('version').as('v'))
    .where('tenant_id', '=', tenantId)
    .where('template_id', '=', templateId)
    .executeTakeFirst();
  return Number(row?.v ?? 0);
}

export async function updateTemplate(
  db: Executor,
  tenantId: string,
  id: string,
  set: Partial<Omit<TemplatesTable, 'tenant_id' | 'id' | 'created_at'>>,
): Promise<boolean> {
  const res = await db
    .updateTable('templates')
    .set(set)
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(res.numUpdatedRows) > 0;
}

/** Deletes the template and all its versions. Transmissions already accepted keep their copy. */
export async function deleteTemplate(db: Executor, tenantId: string, id: string): Promise<boolean> {
  const res = await db
    .deleteFrom('templates')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
  if (Number(res.numDeletedRows) === 0) return false;
  await db.deleteFrom('template_versions').where('tenant_id', '=', tenantId).where('template_id', '=', id).execute();
  return true;
}
