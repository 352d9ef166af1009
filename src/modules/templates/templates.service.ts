import type { Database } from '../../db/index.ts';
import type { Executor } from '../../db/executor.ts';
import { newestFirstPage } from '../../db/newest-first-page.ts';
import type { TemplatesTable, TemplateVersionsTable } from '../../db/schema.ts';
import { isUniqueViolation } from '../../db/unique-violation.ts';
import { nowIso } from '../../lib/clock.ts';
import { formatMailbox, parseMailbox } from '../../lib/email.ts';
import { notFound, validationError } from '../../lib/errors.ts';
import { isUuid, newId } from '../../lib/ids.ts';
import type { CursorCodec, Page } from '../../lib/pagination.ts';
import { fieldProblems, languageProblems, type Problem } from '../content/content-rules.ts';
import { type PreviewView, previewUnsaved, renderPreview } from '../content/preview.ts';
import { mergeData } from '../content/render-content.ts';
import type { TemplateForSend } from '../content/send-content.ts';
import {
  deleteTemplate,
  findTemplate,
  findTemplateByName,
  findVersions,
  insertTemplate,
  insertVersion,
  listVersions,
  updateTemplate,
} from './templates.repo.ts';
import {
  type CreateTemplateInput,
  MAX_DEFAULTS_BYTES,
  type PreviewInput,
  type TemplateVersionView,
  type TemplateView,
  type UpdateTemplateInput,
} from './templates.schema.ts';

function toVersionView(v: TemplateVersionsTable): TemplateVersionView {
  return {
    version: v.version,
    subject: v.subject,
    text: v.text,
    html: v.html,
    from: v.from,
    reply_to: v.reply_to,
    headers: JSON.parse(v.headers) as Record<string, string>,
    defaults: JSON.parse(v.defaults) as Record<string, unknown>,
    created_at: v.created_at,
  };
}

const nameTaken = () => validationError([{ field: 'name', message: 'a template with this name already exists' }]);

type VersionFields = Omit<TemplateVersionsTable, 'tenant_id' | 'template_id' | 'version' | 'created_at'>;

/**
 * Checks a version's fields (422 naming each bad one) and returns them in stored form. The
 * language's syntax problems come checked already (languageProblems, on the sandbox's threads):
 * a version is checked inside the transaction that saves it, which must not wait for a thread.
 */
function checkVersion(v: Omit<TemplateVersionView, 'version' | 'created_at'>, language: Problem[]): VersionFields {
  const problems: Problem[] = [...fieldProblems(v), ...language];
  if (v.text === null && v.html === null) problems.push({ field: 'text', message: 'a template needs text or html' });
  const defaults = JSON.stringify(v.defaults);
  if (Buffer.byteLength(defaults) > MAX_DEFAULTS_BYTES)
    problems.push({ field: 'defaults', message: 'defaults may be at most 64 KB serialized' });
  if (problems.length) throw validationError(problems);
  // Mailboxes are stored rebuilt from what was checked (as transmissions store them).
  const mailbox = (s: string | null) => {
    const m = s === null ? null : parseMailbox(s);
    return m ? formatMailbox(m) : null;
  };
  return {
    subject: v.subject,
    text: v.text,
    html: v.html,
    from: mailbox(v.from),
    reply_to: mailbox(v.reply_to),
    headers: JSON.stringify(v.headers),
    defaults,
  };
}

/**
 * Stored templates (docs/templates.md, docs/api.md "Templates"). Every save is a new version;
 * the template row points at its draft (always the newest version) and its published one.
 */
export class TemplatesService {
  constructor(
    private readonly database: Database,
    private readonly cursors: CursorCodec,
  ) {}

  private get db() {
    return this.database.db;
  }

  private async view(db: Executor, row: TemplatesTable): Promise<TemplateView> {
    const wanted = [row.draft_version, ...(row.published_version === null ? [] : [row.published_version])];
    const versions = await findVersions(db, row.tenant_id, row.id, [...new Set(wanted)]);
    const byNumber = new Map(versions.map((v) => [v.version, toVersionView(v)]));
    return {
      id: row.id,
      name: row.name,
      description: row.description,
      published: row.published_version === null ? null : (byNumber.get(row.published_version) ?? null),
      draft: byNumber.get(row.draft_version) ?? null,
      created_at: row.created_at,
      updated_at: row.updated_at,
    };
  }

  private async row(db: Executor, tenantId: string, id: string): Promise<TemplatesTable> {
    const row = isUuid(id) ? await findTemplate(db, tenantId, id) : undefined;
    if (!row) throw notFound('Template');
    return row;
  }

  /** Validates a create body before any transaction opens (the idempotent create's effect is the insert). */
  async prepareCreate(
    input: CreateTemplateInput,
  ): Promise<{ name: string; description: string | null; version: VersionFields }> {
    const v = {
      subject: input.subject,
      text: input.text ?? null,
      html: input.html ?? null,
      from: input.from ?? null,
      reply_to: input.reply_to ?? null,
      headers: input.headers ?? {},
      defaults: input.defaults ?? {},
    };
    return {
      name: input.name.trim(),
      description: input.description ?? null,
      version: checkVersion(v, await languageProblems(v, '')),
    };
  }

  async insertPrepared(
    db: Executor,
    tenantId: string,
    p: Awaited<ReturnType<TemplatesService['prepareCreate']>>,
  ): Promise<TemplateView> {
    if (await findTemplateByName(db, tenantId, p.name)) throw nameTaken();
    const now = nowIso();
    const row: TemplatesTable = {
      tenant_id: tenantId,
      id: newId(),
      name: p.name,
      description: p.description,
      published_version: null,
      draft_version: 1,
      created_at: now,
      updated_at: now,
    };
    try {
      await insertTemplate(db, row);
    } catch (err) {
      if (isUniqueViolation(err)) throw nameTaken();
      throw err;
    }
    await insertVersion(db, { tenant_id: tenantId, template_id: row.id, version: 1, ...p.version, created_at: now });
    return this.view(db, row);
  }

  async list(tenantId: string, limit: number, cursor?: string): Promise<Page<TemplateView>> {
    const page = await newestFirstPage(
      this.db,
      'templates',
      tenantId,
      { limit, cursor, cursors: this.cursors },
      (r) => r,
    );
    return { data: await Promise.all(page.data.map((r) => this.view(this.db, r))), next_cursor: page.next_cursor };
  }

  async get(tenantId: string, id: string): Promise<TemplateView> {
    return this.view(this.db, await this.row(this.db, tenantId, id));
  }

  /** A new draft version: fields not sent are carried over from the latest draft. */
  async update(tenantId: string, id: string, input: UpdateTemplateInput): Promise<TemplateView> {
    // The parts sent are checked before the transaction; parts carried over from the draft were
    // checked when they were saved.
    const language = await languageProblems(input, '');
    return this.db.transaction().execute(async (trx) => {
      const current = await this.row(trx, tenantId, id);
      const [draftRow] = await findVersions(trx, tenantId, id, [current.draft_version]);
      if (!draftRow) throw notFound('Template');
      const draft = toVersionView(draftRow);
      const pick = <K extends keyof TemplateVersionView>(k: K & keyof UpdateTemplateInput) =>
        (input[k] === undefined ? draft[k] : input[k]) as TemplateVersionView[K];
      const version = checkVersion(
        {
          subject: pick('subject'),
          text: pick('text'),
          html: pick('html'),
          from: pick('from'),
          reply_to: pick('reply_to'),
          headers: pick('headers'),
          defaults: pick('defaults'),
        },
        language,
      );
      const name = input.name?.trim();
      if (name && name !== current.name && (await findTemplateByName(trx, tenantId, name))) throw nameTaken();
      const now = nowIso();
      // The row update comes first: it serialises concurrent saves of this template (row lock on
      // PostgreSQL, the one writer on SQLite), so each gets its own version number.
      const next = await trx
        .updateTable('templates')
        .set((eb) => ({
          draft_version: eb('draft_version', '+', 1),
          updated_at: now,
          ...(name ? { name } : {}),
          ...(input.description !== undefined ? { description: input.description } : {}),
        }))
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .returning('draft_version')
        .executeTakeFirst()
        .catch((err: unknown) => {
          throw isUniqueViolation(err) ? nameTaken() : err;
        });
      if (!next) throw notFound('Template');
      await insertVersion(trx, {
        tenant_id: tenantId,
        template_id: id,
        version: next.draft_version,
        ...version,
        created_at: now,
      });
      return this.view(trx, await this.row(trx, tenantId, id));
    });
  }

  async delete(tenantId: string, id: string): Promise<void> {
    const ok = isUuid(id) && (await this.db.transaction().execute((trx) => deleteTemplate(trx, tenantId, id)));
    if (!ok) throw notFound('Template');
  }

  /** The draft becomes the published version (and stays the draft until the next save). */
  async publish(tenantId: string, id: string): Promise<TemplateView> {
    return this.db.transaction().execute(async (trx) => {
      const row = await this.row(trx, tenantId, id);
      await updateTemplate(trx, tenantId, id, { published_version: row.draft_version, updated_at: nowIso() });
      return this.view(trx, await this.row(trx, tenantId, id));
    });
  }

  async versions(tenantId: string, id: string, limit: number, cursor?: string): Promise<Page<TemplateVersionView>> {
    await this.row(this.db, tenantId, id);
    const before = cursor ? Number(this.cursors.decode(cursor).version) : undefined;
    const rows = await listVersions(this.db, tenantId, id, {
      limit,
      ...(before !== undefined && Number.isInteger(before) ? { beforeVersion: before } : {}),
    });
    const hasMore = rows.length > limit;
    const pageRows = hasMore ? rows.slice(0, limit) : rows;
    const last = pageRows[pageRows.length - 1];
    return {
      data: pageRows.map(toVersionView),
      next_cursor: hasMore && last ? this.cursors.encode({ version: String(last.version) }) : null,
    };
  }

  /**
   * The version a send or preview uses: the draft when asked, else the published one. Without
   * a published version: null for sends (422 on content.template_id), the draft for a preview
   * that did not say which.
   */
  async resolve(
    db: Executor,
    tenantId: string,
    id: string,
    useDraft: boolean,
  ): Promise<{ template: TemplatesTable; version: TemplateVersionView } | null> {
    const template = isUuid(id) ? await findTemplate(db, tenantId, id) : undefined;
    if (!template) return null;
    const number = useDraft ? template.draft_version : template.published_version;
    if (number === null) return null;
    const [v] = await findVersions(db, tenantId, id, [number]);
    return v ? { template, version: toVersionView(v) } : null;
  }

  /** For content.template_id: null when the template is unknown (or another tenant's) or unpublished. */
  async forSend(tenantId: string, id: string, useDraft: boolean): Promise<TemplateForSend | null> {
    const r = await this.resolve(this.db, tenantId, id, useDraft);
    if (!r) return null;
    const { version, created_at: _created, ...content } = r.version;
    return { templateId: r.template.id, version, content };
  }

  /** The dashboard editor's live preview of content not saved yet (content/preview.ts). */
  renderUnsaved(input: Parameters<typeof previewUnsaved>[0]): Promise<PreviewView> {
    return previewUnsaved(input);
  }

  /** Renders a version with sample data (over its defaults); render problems are 422 naming the part. */
  async preview(tenantId: string, id: string, input: PreviewInput): Promise<PreviewView> {
    const row = await this.row(this.db, tenantId, id);
    const useDraft = input.draft ?? row.published_version === null;
    const r = await this.resolve(this.db, tenantId, id, useDraft);
    if (!r)
      throw validationError([
        { field: 'draft', message: 'the template has no published version; preview the draft with "draft": true' },
      ]);
    const v = r.version;
    return renderPreview(
      { ...v, headers: v.headers },
      mergeData(v.defaults, input.substitution_data),
      `template:${id}:${v.version}`,
    );
  }
}
