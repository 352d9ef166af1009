import type { Database } from '../../db/index.ts';
import { Type } from '@sinclair/typebox';
import { SESSION_ROUTE, sessionTenant } from '../../http/dashboard-session.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { overviewStats, RANGES, type RangeName } from './stats.ts';

/** What the overview's stats need. */
export interface StatsRoutesDeps {
  database: Database;
}

const DEFAULT_RANGE: RangeName = '7d';

/** The overview page's counts and charts (stats.ts), for the signed-in session's tenant. */
export function registerDashboardStatsRoutes(app: TypedApp, c: StatsRoutesDeps) {
  app.get(
    '/dashboard/api/stats',
    {
      config: SESSION_ROUTE,
      schema: {
        hide: true,
        querystring: Type.Object({
          range: Type.Optional(
            Type.Unsafe<RangeName>(Type.String({ enum: Object.keys(RANGES), default: DEFAULT_RANGE })),
          ),
        }),
      },
    },
    async (req) => overviewStats(c.database.db, sessionTenant(req), req.query.range ?? DEFAULT_RANGE),
  );
}
