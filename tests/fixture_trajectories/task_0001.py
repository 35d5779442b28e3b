# ClawGym task_0001: filter and rank the programs, write the top 3, rewrite the email.
import csv
import os

os.makedirs("output", exist_ok=True)
with open("input/programs.csv", newline="", encoding="utf-8") as f:
    reader = csv.DictReader(f)
    columns = reader.fieldnames
    rows = list(reader)
kept = []
for r in rows:
    tuition = float(r["tuition_usd"])
    if (r["degree_level"] == "BSc" and "biochem" in r["program_name"].lower()
            and r["language"] == "English" and r["country"] != "Egypt" and tuition <= 10000
            and r["deadline"] >= "2025-03-01" and float(r["gpa_min"]) <= 3.6
            and float(r["ielts_min"]) <= 6.5 and r["research_project"] == "yes"):
        score = (float(r["lab_hours_per_week"]) + max(0.0, (10000 - tuition) / 1000)
                 + (5 if r["scholarship_available"] == "yes" else 0) + 3
                 + (2 if r["deadline"] >= "2025-05-01" else 0))
        kept.append(dict(r, rank_score=score))
kept.sort(key=lambda r: (-r["rank_score"], float(r["tuition_usd"]), r["university"]))
with open("output/filtered_ranked_programs.csv", "w", newline="", encoding="utf-8") as f:
    w = csv.DictWriter(f, fieldnames=columns + ["rank_score"])
    w.writeheader()
    w.writerows(kept)
top3 = [r["university"] for r in kept[:3]]
with open("output/top3_university_names.txt", "w", encoding="utf-8") as f:
    f.write(";".join(top3) + "\n")
email = (
    "Dear Admissions Committee, my name is Omar Hassan, and I am an undergraduate student "
    "from Alexandria, Egypt, applying to begin a BSc in biochemistry in Fall 2025. I hold a "
    "GPA 3.6/4.0 and IELTS 6.5, and my budget is USD 10,000 per year. I am especially "
    "interested in biochemistry research, in particular enzymes, protein chemistry and wet "
    "lab work, and I have run spectrophotometer experiments with a youth science club. The "
    "programs I am most interested in are " + "; ".join(top3) + ". I would be grateful "
    "for guidance on suitable research opportunities in these programs. Thank you for your "
    "time and consideration. Kind regards, Omar Hassan\n"
)
with open("output/revised_email.txt", "w", encoding="utf-8") as f:
    f.write(email)
