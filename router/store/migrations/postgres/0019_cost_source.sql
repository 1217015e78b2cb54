-- jobrouter schema v19 (PostgreSQL): cost you can trust (issue 29). An attempt's cost keeps where its
-- price came from (`cost_source`: 'config', a provider's configured price, or 'litellm_map',
-- litellm's cost map as shipped) and, when the cost is unknown (`cost_usd` NULL), why
-- (`cost_unknown`: no price for the model, no usage reported): an unknown cost is never 0.
-- Rows finished before keep NULL in both: their cost_usd was litellm's, its source not kept.
ALTER TABLE attempts ADD COLUMN cost_source TEXT;
ALTER TABLE attempts ADD COLUMN cost_unknown TEXT;
