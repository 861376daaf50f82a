"""Hand-written demo content, topics 106-110 (see README.md; build.py writes the files)."""

TOPICS = [
    {
        "query_id": "106",
        "text": "what causes ocean tides",
        "questions": [
            ("What causes ocean tides?", ["gravitational pull of the moon"]),
            ("How does the sun affect tides?", None),
            ("How many high tides occur each day in most places?", ["two"]),
            ("What are spring tides?", None),
            ("What are neap tides?", None),
            ("Why is there a bulge on the side of the Earth facing away from the moon?", None),
            ("How long is the interval between two high tides?", ["12 hours and 25 minutes"]),
            ("Where are the highest tides in the world?", ["Bay of Fundy"]),
            ("What is the tidal range?", None),
            ("How does the shape of the coastline affect tides?", None),
        ],
        # the nuggets a good answer must hold (the others are "okay"), by position below
        "vital_nuggets": (0, 1),
        "nuggets": [
            "Tides are caused mainly by the moon's gravity pulling on the oceans.",
            "Two bulges form, one facing the moon and one on the opposite side.",
            "Most coasts get two high tides about 12 hours 25 minutes apart.",
            "Spring tides occur when sun and moon align; neap tides when they are at right angles.",
            "Coastline shape and sea floor amplify tides, as in the Bay of Fundy.",
        ],
        "passages": [
            (3, "Tides are the regular rise and fall of the sea caused mainly by the gravitational pull "
                "of the moon. The moon pulls hardest on the water nearest to it, raising a bulge, while "
                "on the far side of the Earth the water lags behind the planet, forming a second bulge."),
            (3, "As the Earth rotates through the two bulges, most coasts see two high tides and two "
                "low tides each lunar day. Because the moon moves along its orbit, high tides arrive "
                "about 12 hours and 25 minutes apart, roughly 50 minutes later each day."),
            (3, "The sun also raises tides, a little under half as strong as the moon's. At new and "
                "full moon the sun and moon line up and their effects add, producing large spring "
                "tides. When they are at right angles, at the quarter moons, the smaller neap tides "
                "occur."),
            (2, "The tidal range, the difference between high and low water, depends on the shape of "
                "the coastline and sea floor. Funnel-shaped bays amplify it: in the Bay of Fundy in "
                "Canada the range can exceed 16 meters, the largest in the world."),
            (1, "Tidal power stations capture energy from the rise and fall of the sea. The La Rance "
                "barrage in France has generated electricity from tides since 1966."),
            (1, "Rip currents are narrow channels of water flowing away from the beach. Swimmers caught "
                "in one should swim parallel to the shore rather than against the current."),
            (0, "Tide is a laundry detergent brand introduced in 1946. Its pods contain concentrated "
                "detergent, stain remover and brightener in a dissolvable film."),
            (0, "Tsunamis are series of long waves usually caused by undersea earthquakes. They travel "
                "across ocean basins at the speed of a jet airliner and grow tall as they reach "
                "shallow water."),
            (0, "The moon's surface is covered in craters, dust and dark basaltic plains called maria, "
                "formed by ancient lava flows. Twelve astronauts walked on it between 1969 and 1972."),
            (0, "Alabama's college football team, nicknamed the Crimson Tide, has won more national "
                "championships than any other program in the modern era."),
        ],
    },
    {
        "query_id": "107",
        "text": "history of the printing press",
        "questions": [
            ("Who invented the movable-type printing press in Europe?", ["Johannes Gutenberg"]),
            ("When was the Gutenberg printing press invented?", ["around 1440"]),
            ("What was the first major book printed with movable type in Europe?", ["Gutenberg Bible"]),
            ("What earlier printing techniques existed in China and Korea?", None),
            ("What material was Gutenberg's movable type made of?", None),
            ("What device was the printing press adapted from?", ["wine press", "screw press"]),
            ("How quickly did printing spread across Europe?", None),
            ("How did the printing press affect the Reformation?", None),
            ("How did the printing press change literacy?", None),
            ("What replaced hand-operated presses in the nineteenth century?", None),
        ],
        # the nuggets a good answer must hold (the others are "okay"), by position below
        "vital_nuggets": (0, 3),
        "nuggets": [
            "Johannes Gutenberg developed movable-type printing in Mainz around 1440.",
            "He used a metal alloy type cast in molds, oil-based ink and a screw press.",
            "Woodblock printing and movable type existed earlier in China and Korea.",
            "By 1500 presses in over 200 European towns had printed millions of books.",
            "Printing spread Reformation pamphlets and raised literacy.",
        ],
        "passages": [
            (3, "Johannes Gutenberg, a goldsmith from Mainz, developed a printing press with movable "
                "metal type around 1440. He cast letters from an alloy of lead, tin and antimony in a "
                "hand mold, used an oil-based ink, and adapted the screw press used for making wine "
                "and pressing olives."),
            (3, "Gutenberg's most famous work, the Gutenberg Bible, was completed around 1455. About 180 "
                "copies were printed, and 49 survive today. It showed that printed books could match "
                "the beauty of manuscripts copied by hand."),
            (2, "Printing existed long before Gutenberg. Chinese printers used carved woodblocks by the "
                "seventh century, Bi Sheng made movable type from baked clay around 1040, and Korean "
                "printers produced the Jikji with metal type in 1377."),
            (3, "Printing spread quickly: by 1500 presses operated in more than 200 European towns and "
                "had produced perhaps twenty million books. Cheaper books helped literacy rise, and "
                "Martin Luther's pamphlets were printed in hundreds of thousands of copies, carrying "
                "the Reformation across Germany."),
            (2, "In the nineteenth century steam-powered rotary presses replaced hand-operated wooden "
                "presses. Friedrich Koenig's steam press printed The Times in 1814 at over a thousand "
                "sheets an hour."),
            (1, "Before printing, books in Europe were copied by hand, many of them by monks in "
                "monastery scriptoria. A single Bible could take a scribe more than a year."),
            (1, "Paper reached Europe from China through the Islamic world. Paper mills operated in "
                "Spain by the twelfth century and in Italy soon after, supplying a cheaper surface than "
                "parchment."),
            (0, "Modern inkjet printers spray tiny droplets of ink through nozzles in the print head. "
                "Replacement cartridges are often the largest cost of owning one."),
            (0, "A press release is a short written statement sent to journalists to announce news, "
                "usually with a headline, a dateline and a quote from a spokesperson."),
            (0, "Bench press technique: lie flat, grip the bar slightly wider than shoulder width, "
                "lower it to the middle of the chest and press it back up while keeping your feet "
                "planted."),
        ],
    },
    {
        "query_id": "108",
        "text": "how to make espresso",
        "questions": [
            ("What is espresso?", None),
            ("What water pressure is used to brew espresso?", ["9 bar"]),
            ("What grind size is needed for espresso?", ["fine"]),
            ("How much coffee is used for a double shot?", ["18 grams"]),
            ("How long should an espresso shot take to extract?", ["25 to 30 seconds"]),
            ("What water temperature is ideal for espresso?", None),
            ("What does tamping do?", None),
            ("What is crema?", None),
            ("What causes sour or bitter espresso?", None),
            ("How can you make espresso without an espresso machine?", ["moka pot"]),
        ],
        # the nuggets a good answer must hold (the others are "okay"), by position below
        "vital_nuggets": (0, 1),
        "nuggets": [
            "Espresso forces hot water through finely ground coffee at about 9 bar.",
            "A double shot uses about 18 g of coffee for about 36 g of drink in 25-30 seconds.",
            "Water should be 90-96 degrees Celsius.",
            "Tamping compacts the grounds evenly so water flows through uniformly.",
            "Sour shots are under-extracted (grind finer); bitter shots over-extracted (grind coarser).",
        ],
        "passages": [
            (3, "Espresso is a concentrated coffee made by forcing hot water through a compact puck of "
                "finely ground coffee at about 9 bar of pressure. The result is a small, thick drink "
                "topped with crema, a golden foam of emulsified oils and carbon dioxide."),
            (3, "For a double shot, dose about 18 grams of finely ground coffee into the portafilter, "
                "level it and tamp it firmly and evenly so the water cannot find channels. Brew with "
                "water at 90 to 96 degrees Celsius and aim for about 36 grams of espresso in 25 to 30 "
                "seconds."),
            (2, "If your espresso tastes sour and runs too fast, it is under-extracted: grind finer. If "
                "it tastes bitter and drips slowly, it is over-extracted: grind coarser or shorten the "
                "shot. Change one variable at a time."),
            (2, "Without a machine, a stovetop moka pot makes a strong coffee similar to espresso. "
                "Water in the lower chamber is heated until steam pressure pushes it up through the "
                "coffee, though at only about 1 to 2 bar."),
            (1, "A cappuccino is one shot of espresso topped with equal parts steamed milk and milk "
                "foam, while a latte uses more steamed milk and only a thin layer of foam."),
            (1, "Coffee beans lose flavor within weeks of roasting. Store them whole in an airtight "
                "container away from light and grind just before brewing."),
            (0, "Espresso is also the name of a fast intercity train service that links major cities "
                "with few intermediate stops."),
            (0, "Cold brew is made by steeping coarse coffee grounds in cold water for 12 to 24 hours, "
                "then filtering. It is less acidic than hot-brewed coffee."),
            (0, "Tea contains the amino acid L-theanine, which may promote calm alertness together with "
                "its caffeine. Green tea should be brewed below boiling to avoid bitterness."),
            (0, "The coffee plant Coffea arabica originated in the highlands of Ethiopia and is now "
                "grown across the tropics between the Tropics of Cancer and Capricorn."),
        ],
    },
    {
        "query_id": "109",
        "text": "symptoms of vitamin d deficiency",
        "questions": [
            ("What are common symptoms of vitamin D deficiency?", None),
            ("What bone disease does vitamin D deficiency cause in children?", ["rickets"]),
            ("What bone disease does vitamin D deficiency cause in adults?", ["osteomalacia"]),
            ("Why does the body need vitamin D?", None),
            ("How does the skin make vitamin D?", None),
            ("Who is at higher risk of vitamin D deficiency?", None),
            ("Which blood test measures vitamin D levels?", ["25-hydroxyvitamin D"]),
            ("Which foods contain vitamin D?", None),
            ("How is vitamin D deficiency treated?", None),
            ("Can vitamin D deficiency cause fatigue and muscle weakness?", None),
        ],
        # the nuggets a good answer must hold (the others are "okay"), by position below
        "vital_nuggets": (0, 1),
        "nuggets": [
            "Symptoms include fatigue, bone pain, muscle weakness and aches.",
            "Severe deficiency causes rickets in children and osteomalacia in adults.",
            "Vitamin D is needed to absorb calcium for bones.",
            "Risk is higher with little sun, dark skin, older age and obesity.",
            "Diagnosed with a 25-hydroxyvitamin D blood test and treated with supplements.",
        ],
        "passages": [
            (3, "Vitamin D deficiency often causes no symptoms at first. When it does, people report "
                "tiredness, bone pain, muscle weakness, aches and cramps, and low mood. Over time the "
                "lack of vitamin D softens the bones."),
            (3, "Vitamin D helps the gut absorb calcium and phosphate. Severe, long-lasting deficiency "
                "causes rickets in children, with bowed legs and delayed growth, and osteomalacia in "
                "adults, which leads to bone pain and fractures."),
            (2, "The skin makes vitamin D when it is exposed to ultraviolet B light from the sun. People "
                "who spend little time outdoors, live far from the equator, have dark skin, are older "
                "or obese are more likely to be deficient."),
            (2, "Doctors diagnose the deficiency with a blood test for 25-hydroxyvitamin D. Levels "
                "below about 30 nmol/L are usually considered deficient. Treatment is vitamin D3 "
                "supplements, sometimes in high doses for several weeks."),
            (1, "Oily fish such as salmon, mackerel and sardines, egg yolks, and fortified milk and "
                "cereals are among the few foods that contain vitamin D."),
            (1, "Vitamin C deficiency causes scurvy, with bleeding gums, bruising and slow wound "
                "healing. Sailors once prevented it by eating citrus fruit on long voyages."),
            (0, "Vitamin B12 is found almost only in animal foods, so vegans are advised to take a "
                "supplement or eat fortified foods."),
            (0, "D-Day, 6 June 1944, was the Allied landing in Normandy, the largest seaborne invasion "
                "in history."),
            (0, "Sunscreen with SPF 30 blocks about 97 percent of UVB rays. Dermatologists recommend "
                "reapplying every two hours outdoors."),
            (1, "Calcium supplements are often combined with vitamin D for people with osteoporosis, "
                "a condition in which bones become thin and fragile."),
        ],
    },
    {
        "query_id": "110",
        "text": "how do vaccines work",
        "questions": [
            ("How do vaccines train the immune system?", None),
            ("What is an antigen?", None),
            ("What are antibodies?", None),
            ("What are memory cells?", None),
            ("What types of vaccines exist?", None),
            ("How do mRNA vaccines work?", None),
            ("Why are some vaccines given in several doses?", ["booster"]),
            ("What is herd immunity?", None),
            ("Who developed the first vaccine?", ["Edward Jenner"]),
            ("What are common side effects of vaccines?", None),
        ],
        # the nuggets a good answer must hold (the others are "okay"), by position below
        "vital_nuggets": (0, 1, 2),
        "nuggets": [
            "Vaccines expose the immune system to a harmless form or part of a pathogen.",
            "The immune system makes antibodies and memory cells against the antigen.",
            "Memory cells allow a fast response on later infection.",
            "Vaccine types include live attenuated, inactivated, subunit and mRNA.",
            "Herd immunity protects those who cannot be vaccinated.",
        ],
        "passages": [
            (3, "A vaccine teaches the immune system to recognize a pathogen without causing the "
                "disease. It contains an antigen, a weakened or killed germ or just one of its "
                "proteins, which B cells answer by producing antibodies that bind to it."),
            (3, "After vaccination some B and T cells become long-lived memory cells. If the real "
                "pathogen appears later, these cells recognize it and mount a fast, strong response "
                "before the infection can take hold. Booster doses refresh this memory."),
            (2, "There are several kinds of vaccines: live attenuated vaccines such as measles, "
                "inactivated vaccines such as polio shots, subunit vaccines containing only a protein, "
                "and mRNA vaccines, which give cells instructions to make a harmless spike protein "
                "that the immune system then learns to recognize."),
            (2, "When enough people are immune, a pathogen cannot spread easily, protecting those who "
                "cannot be vaccinated, such as newborns. This is herd immunity; for measles about 95 "
                "percent of the population must be immune."),
            (1, "Edward Jenner showed in 1796 that material from cowpox sores protected people against "
                "smallpox. Smallpox was declared eradicated in 1980."),
            (1, "Common side effects of vaccines are a sore arm, mild fever and tiredness for a day "
                "or two. Serious allergic reactions are very rare."),
            (0, "Antibiotics kill bacteria or stop them from growing but have no effect on viruses. "
                "Overuse has led to resistant strains."),
            (0, "Vacuum cleaners work by creating low pressure with a fan so that air, and the dust it "
                "carries, rushes into the machine and through a filter."),
            (0, "Computer viruses are programs that copy themselves into other files. Antivirus "
                "software scans for known signatures and suspicious behaviour."),
            (0, "The common cold is caused by more than 200 viruses, most often rhinoviruses, and "
                "usually clears up within a week to ten days."),
        ],
    },
]
