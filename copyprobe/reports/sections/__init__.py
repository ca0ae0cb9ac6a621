"""The sections of the report page (copyprobe.reports.html assembles them).

Each module turns part of a loaded run directory into the values one part of
templates/report.html.j2 shows; none reads files or loads a model:

    formatting       numbers, p-values, percentages, truncation; what label-1/0 rows are called
    per_method       one block per method: metrics, ROC and score plots, examples
    documents        the per-document table (mean score and rank per method)
    failures         null scores and failed requests, counted by method and reason
    cost             timings, cache and requests of run.json
    blind_baseline   the model-free baseline and its warning
    verdicts         the audit's verdicts: one reader for every verdicts.json (an older
                     layout is normalised into today's at its edge), words as the file holds them
    run_settings     the settings table from run.json
"""
