"""HTML reports of saved runs: ``copyprobe.reports.html.write_report(run_dir, out=None)``.

Nothing heavy is imported here; matplotlib and jinja2 load when a report is written.
"""
